import type {V1Container, V1Pod, V1PodSpec, V1Taint, V1Toleration, V1Volume} from '@kubernetes/client-node'
import {DevPodLabel, DevWorkloadAnnotation, RestartAnnotation} from '../../common/labels.js'
import {UserError} from '../../errors.js'
import {workloadText, type Workload} from './workload.js'

/**
 * Labels a controller puts on the pods it owns. A pod carrying them would be
 * adopted by that controller (a ReplicaSet's pod-template-hash, a Job's
 * controller-uid) and counted, or deleted, as one of its own: the dev pod
 * keeps the workload's labels but not these.
 */
export const ControllerLabels = [
  'pod-template-hash',
  'controller-revision-hash',
  'statefulset.kubernetes.io/pod-name',
  'apps.kubernetes.io/pod-index',
  'batch.kubernetes.io/controller-uid',
  'controller-uid',
  'batch.kubernetes.io/job-completion-index',
]

/** The volume of the current directory, mounted at the same path in the dev container. */
export const WorkdirVolume = 'vnode-dev-workdir'

/** The service account token volume the API server injects into each pod (kube-api-access-xxxxx): a copied pod gets its own. */
const InjectedTokenVolume = /^kube-api-access-[a-z0-9]+$/

export interface DevPodInput {
  workload: Workload
  namespace: string
  /** -c: the container that runs COMMAND; required when the template has several. */
  container?: string
  command: string[]
  /** The current directory: the dev container's working directory, mounted at the same path. */
  cwd: string
  node: {name: string; taints: V1Taint[]}
  /** --no-probes: the dev container gets no readiness probe either. */
  probes: boolean
  /** A few random characters: the pod's name is `<workload>-dev-<suffix>`. */
  suffix: string
}

/** The container of the template that runs COMMAND: -c, or the only one. */
export function chooseDevContainer(spec: V1PodSpec, name: string | undefined, what: string): string {
  const names = spec.containers.map((c) => c.name)
  if (name !== undefined) {
    if (!names.includes(name)) throw new UserError(`container "${name}" not found in ${what}: choose one of [${names.join(' ')}]`)
    return name
  }
  if (names.length === 1) return names[0]
  throw new UserError(`${what} has ${names.length} containers: choose the one to run your command with -c (one of [${names.join(' ')}])`)
}

/** `<workload>-dev-<suffix>`, within the 63 characters a pod's hostname can carry. */
export function devPodName(workload: string, suffix: string): string {
  const tail = `-dev-${suffix}`
  return `${workload.slice(0, 63 - tail.length).replace(/[-.]+$/, '')}${tail}`
}

/**
 * The dev pod: the workload's pod as its controller would make it, with the
 * chosen container running COMMAND in the current directory, pinned to the
 * vnode node. Its labels (less the controller's) put it behind the
 * workload's Services; its env, volumes, service account and sidecars are the
 * template's. Liveness and startup probes of the dev container are dropped:
 * a process paused in a debugger must not be killed for it.
 */
export function buildDevPod(input: DevPodInput): V1Pod {
  const {workload, node} = input
  const template = structuredClone(workload.template)
  const spec = template.spec!
  const what = workloadText(workload.ref)
  const container = chooseDevContainer(spec, input.container, what)
  const name = devPodName(workload.ref.name, input.suffix)
  const labels = {...withoutKeys(template.metadata?.labels ?? {}, ControllerLabels), [DevPodLabel]: 'true'}
  const annotations = {...(template.metadata?.annotations ?? {}), [DevWorkloadAnnotation]: what, [RestartAnnotation]: restartValue(container, 0)}
  if (workload.fromPod) stripInstance(spec)
  pinTo(spec, node)
  spec.volumes = [...(spec.volumes ?? []), ...scratchClaims(workload, spec), {name: WorkdirVolume, hostPath: {path: input.cwd, type: 'Directory'}}]
  spec.containers = spec.containers.map((c) => (c.name === container ? devContainer(c, input) : c))
  return {apiVersion: 'v1', kind: 'Pod', metadata: {name, namespace: input.namespace, labels, annotations}, spec}
}

/**
 * A StatefulSet's pods get a claim per replica for each volumeClaimTemplate;
 * the dev pod is no replica of it and must not share one (they are usually
 * ReadWriteOnce): it gets an empty directory of the same name instead.
 */
export function scratchClaims(workload: Workload, spec: V1PodSpec): V1Volume[] {
  const declared = new Set((spec.volumes ?? []).map((v) => v.name))
  return (workload.claimTemplates ?? []).filter((name) => !declared.has(name)).map((name) => ({name, emptyDir: {}}))
}

/** The restart annotation's value for a generation: the node restarts `container` each time it changes. */
export function restartValue(container: string, generation: number): string {
  return `${container}:${generation}`
}

function devContainer(c: V1Container, input: DevPodInput): V1Container {
  const out: V1Container = {...c, command: input.command, workingDir: input.cwd, stdin: false, tty: false}
  delete out.args
  delete out.livenessProbe
  delete out.startupProbe
  if (!input.probes) delete out.readinessProbe
  // The image only names what the node runs when there is no command; a dev pod never waits on a pull policy.
  out.imagePullPolicy = 'IfNotPresent'
  out.volumeMounts = [...(c.volumeMounts ?? []).filter((m) => m.mountPath !== input.cwd), {name: WorkdirVolume, mountPath: input.cwd}]
  return out
}

/** Bound to the node: no scheduling constraints that could refuse it there, and its taints tolerated. */
function pinTo(spec: V1PodSpec, node: {name: string; taints: V1Taint[]}): void {
  spec.nodeName = node.name
  delete spec.nodeSelector
  delete spec.schedulingGates
  if (spec.affinity) delete spec.affinity.nodeAffinity
  const tolerations: V1Toleration[] = [...(spec.tolerations ?? [])]
  for (const t of node.taints) if (!tolerations.some((x) => x.key === t.key && x.operator === 'Exists' && x.effect === t.effect)) tolerations.push({key: t.key, operator: 'Exists', effect: t.effect})
  spec.tolerations = tolerations
}

/** What a running pod's spec has that a new pod must not copy: its node, hostname, priority value, injected token volume. */
function stripInstance(spec: V1PodSpec): void {
  delete spec.nodeName
  delete spec.hostname
  delete spec.priority
  delete spec.ephemeralContainers
  const injected = new Set((spec.volumes ?? []).filter((v: V1Volume) => InjectedTokenVolume.test(v.name) && v.projected).map((v) => v.name))
  spec.volumes = (spec.volumes ?? []).filter((v) => !injected.has(v.name))
  for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) c.volumeMounts = (c.volumeMounts ?? []).filter((m) => !injected.has(m.name))
}

function withoutKeys(map: Record<string, string>, keys: string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(map).filter(([k]) => !keys.includes(k)))
}
