import type {V1Container, V1Probe} from '@kubernetes/client-node'
import type {ContainerKind} from '../container/state.js'
import type {ProbeKind, ProbeResult} from './worker.js'

/**
 * What a probe's verdict does to its container, as the kubelet's SyncPod
 * consumes the prober's results:
 * - readiness: ready follows the verdict, once started;
 * - startup success: started, ready unless a readiness probe decides, the
 *   readiness probe runs at once, and the pod syncs (liveness may start);
 * - liveness or startup failure: the container is killed with its probe's
 *   terminationGracePeriodSeconds (the pod's otherwise), and restarted per
 *   restartPolicy, unless the pod is already terminating.
 */
export type ProbeEffect = {effect: 'ready'; ready: boolean} | {effect: 'started'; ready: boolean} | {effect: 'kill'; message: string; graceMs: number | undefined; restarts: boolean} | {effect: 'none'}

export interface ProbedContainer {
  name: string
  kind: ContainerKind
  spec: V1Container
  started: boolean
}

/** The probes a container runs, in the order they are started (init containers run none). */
export function containerProbes(c: ProbedContainer): Array<[ProbeKind, V1Probe]> {
  if (c.kind === 'init') return []
  const all: Array<[ProbeKind, V1Probe | undefined]> = [
    ['startup', c.spec.startupProbe],
    ['liveness', c.spec.livenessProbe],
    ['readiness', c.spec.readinessProbe],
  ]
  return all.filter((x): x is [ProbeKind, V1Probe] => x[1] !== undefined)
}

export function probeEffect(c: ProbedContainer, kind: ProbeKind, result: ProbeResult, pod: {terminating: boolean; restartPolicy: string}): ProbeEffect {
  if (kind === 'readiness') return {effect: 'ready', ready: result === 'Success' && c.started}
  if (kind === 'startup' && result === 'Success') return {effect: 'started', ready: !c.spec.readinessProbe}
  if (result !== 'Failure' || pod.terminating) return {effect: 'none'}
  const restarts = c.kind === 'sidecar' || pod.restartPolicy !== 'Never'
  const who = c.kind === 'sidecar' ? 'Init container' : 'Container'
  const grace = (kind === 'liveness' ? c.spec.livenessProbe : c.spec.startupProbe)?.terminationGracePeriodSeconds
  return {effect: 'kill', message: `${who} ${c.name} failed ${kind} probe${restarts ? ', will be restarted' : ''}`, graceMs: grace != null ? Number(grace) * 1000 : undefined, restarts}
}
