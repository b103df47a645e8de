import {isTerminalPhase} from '../../common/pods.js'
import {
  condition,
  containersReadyCondition,
  hasAnyRegularContainerStarted,
  initializedCondition,
  isSidecar,
  readyCondition,
  withObservedGeneration,
  withTransitionTimes,
  type PodPhase,
} from './status-conditions.js'
import type {V1Container, V1ContainerStatus, V1Pod, V1PodCondition, V1PodStatus} from '@kubernetes/client-node'
import {SandboxKilledReason, SandboxWaitingReason} from '../provider/handler.js'
import {ContainerStatusUnknownExitCode, ContainerStatusUnknownReason} from '../provider/pod-defaults.js'

/**
 * Pure pod status generation, the kubelet's way (kubelet_pods.go
 * generateAPIPodStatus / getPhase, status/generate.go, status_manager.go
 * TerminatePod): container statuses with defaults, phase rules, the five
 * kubelet conditions with their reasons, startTime once, host and pod IPs.
 */

export const ContainerStatusUnknownMessage = 'The container could not be located when the pod was terminated'

/** Conditions of an in-place resize, which the provider reports (cgroups/resize.ts). */
const ResizeConditionTypes = new Set(['PodResizePending', 'PodResizeInProgress'])

/** A pod-level outcome that replaces the computed phase (admission rejection, node shutdown, provider failure). */
export interface StatusOverride {
  phase: 'Failed' | 'Succeeded'
  reason: string
  message: string
  /** Extra conditions, e.g. DisruptionTarget on node shutdown. */
  conditions?: V1PodCondition[]
  /** A Succeeded pod keeps Succeeded (node shutdown only turns unfinished pods Failed). */
  keepSucceeded?: boolean
  /** The pod never got containers (admission rejection): no container statuses are reported. */
  noContainers?: boolean
}

export interface StatusInput {
  /** The latest pod from the API (spec, metadata and the status the API holds). */
  pod: V1Pod
  /** What the provider last reported (containerStatuses, initContainerStatuses, optional pod-level phase/reason/message). */
  reported?: V1PodStatus
  /** The status we wrote last, if any; else the API's status is the previous one. */
  previous?: V1PodStatus
  nodeIP: string
  now: Date
  /** The provider has the pod's sandbox (PodReadyToStartContainers). */
  sandboxReady: boolean
  /** The pod had a sandbox at some point: its IP is reported even if no status was written while it was ready. */
  hadSandbox?: boolean
  /** The pod worker is terminated: no process of the pod can run any more (kubelet podIsTerminal). */
  podIsTerminal: boolean
  /**
   * With podIsTerminal: the terminated sync's own status, before TerminatePod (which reports the containers that
   * never ended as lost and makes the phase terminal) has run. By default a terminal status includes TerminatePod.
   */
  beforeTerminatePod?: boolean
  /** Processes may still be running: a terminal phase is held back (status manager mergePodStatus). */
  couldHaveRunningContainers: boolean
  override?: StatusOverride
}

export {isTerminalPhase}

/** RFC 3339 second precision, as the kubelet writes times. */
export function toSeconds(d: Date): Date {
  return new Date(Math.floor(d.getTime() / 1000) * 1000)
}

function defaultStatus(c: V1Container, waitingReason: string): V1ContainerStatus {
  return {name: c.name, image: c.image ?? '', imageID: '', ready: false, restartCount: 0, started: false, state: {waiting: {reason: waitingReason}}}
}

/**
 * The volume mounts the kubelet reports for every container, run or not
 * (convertToAPIContainerStatuses): from the spec, read-only ones with
 * recursiveReadOnly Disabled.
 */
function volumeMountStatuses(c: V1Container): Pick<V1ContainerStatus, 'volumeMounts'> {
  if (!c.volumeMounts?.length) return {}
  return {volumeMounts: c.volumeMounts.map((m) => ({name: m.name, mountPath: m.mountPath, ...(m.readOnly ? {readOnly: true, recursiveReadOnly: 'Disabled'} : {})}))}
}

/**
 * What the kubelet adds for a container the runtime knows: its resources and
 * allocatedResources (the allocated requests), without which the API server
 * refuses in-place resize.
 */
function runtimeResources(c: V1Container): Pick<V1ContainerStatus, 'resources' | 'allocatedResources'> {
  const out: Pick<V1ContainerStatus, 'resources' | 'allocatedResources'> = {resources: structuredClone(c.resources ?? {})}
  if (c.resources?.requests) out.allocatedResources = structuredClone(c.resources.requests)
  return out
}

/** convertToAPIContainerStatuses: the provider's report, else the old status carried forward, else waiting. */
function convertStatuses(specs: V1Container[], reported: V1ContainerStatus[] | undefined, previous: V1ContainerStatus[] | undefined, waitingReason: string): V1ContainerStatus[] {
  return specs.map((c) => {
    const r = reported?.find((s) => s.name === c.name)
    if (r) {
      const running = !!r.state?.running
      return {
        ...r,
        name: c.name,
        image: r.image || c.image || '',
        imageID: r.imageID ?? '',
        restartCount: r.restartCount ?? 0,
        ready: r.ready ?? false,
        started: r.started ?? running,
        state: r.state && Object.keys(r.state).length ? r.state : {waiting: {reason: waitingReason}},
        ...volumeMountStatuses(c),
        // What the runtime actuated (its cgroups, a pending resize) wins over the spec's.
        ...(r.containerID ? {...runtimeResources(c), ...(r.resources ? {resources: r.resources} : {}), ...(r.allocatedResources ? {allocatedResources: r.allocatedResources} : {})} : {}),
      }
    }
    const p = previous?.find((s) => s.name === c.name)
    if (p?.state?.terminated) return structuredClone(p)
    const s = {...defaultStatus(c, waitingReason), ...volumeMountStatuses(c)}
    if (p) {
      s.restartCount = p.restartCount ?? 0
      if (p.lastState && Object.keys(p.lastState).length) s.lastState = structuredClone(p.lastState)
    }
    return s
  })
}

/**
 * TerminatePod (status_manager.go): once the pod has initialized, a regular
 * container that is not terminated is reported lost (exit 137); of the init
 * containers, only those up to the last one that ever started are, so a pod
 * that failed in init keeps its later containers waiting (kubectl: Init:Error).
 */
function terminatePod(spec: V1Pod['spec'] & {}, initStatuses: V1ContainerStatus[], statuses: V1ContainerStatus[], now: Date) {
  const started = initializedPrefix(initStatuses)
  return {
    initStatuses: [...terminateAll(initStatuses.slice(0, started), now), ...initStatuses.slice(started)],
    statuses: hasPodInitialized(spec, initStatuses, statuses) ? terminateAll(statuses, now) : statuses,
  }
}

/** hasPodInitialized: no init containers, a regular container left waiting once, or the last init container exited 0. */
function hasPodInitialized(spec: V1Pod['spec'] & {}, initStatuses: V1ContainerStatus[], statuses: V1ContainerStatus[]): boolean {
  const inits = spec.initContainers ?? []
  if (inits.length === 0) return true
  if (statuses.some((s) => !!s.lastState?.terminated || !s.state?.waiting)) return true
  const last = initStatuses.find((s) => s.name === inits[inits.length - 1].name)
  const exit = last?.lastState?.terminated?.exitCode ?? last?.state?.terminated?.exitCode
  return exit === 0
}

/** initializedContainers: how many init containers, from the first, have attempted to start (at least one). */
function initializedPrefix(initStatuses: V1ContainerStatus[]): number {
  for (let i = initStatuses.length - 1; i >= 0; i--) {
    if (!initStatuses[i].state?.waiting || initStatuses[i].lastState?.terminated) return i + 1
  }
  return Math.min(1, initStatuses.length)
}

/** Whatever is not terminated is reported as lost, exit 137. */
function terminateAll(statuses: V1ContainerStatus[], now: Date, which: (s: V1ContainerStatus) => boolean = () => true): V1ContainerStatus[] {
  return statuses.map((s) => {
    if (s.state?.terminated || !which(s)) return s
    const startedAt = s.state?.running?.startedAt
    return {
      ...s,
      ready: false,
      started: false,
      state: {
        terminated: {
          exitCode: ContainerStatusUnknownExitCode,
          reason: ContainerStatusUnknownReason,
          message: ContainerStatusUnknownMessage,
          ...(startedAt ? {startedAt} : {}),
          finishedAt: now,
        },
      },
    }
  })
}

/**
 * SyncPod's isTerminal, from the provider's last report: a pod-level
 * terminal phase, or every container reported and the phase they give is
 * terminal (nothing will restart).
 */
export function reportIsTerminal(pod: V1Pod, reported: V1PodStatus | undefined): boolean {
  if (!reported) return false
  if (isTerminalPhase(reported.phase)) return true
  const spec = pod.spec
  if (!spec) return false
  const statuses = reported.containerStatuses ?? []
  if (statuses.length < spec.containers.length) return false
  return isTerminalPhase(getPhase(pod, reported.initContainerStatuses ?? [], statuses, false))
}

/**
 * getPhase (kubelet_pods.go, v1.34, ContainerRestartRules off): regular init containers hold the pod Pending until
 * each has exited 0; a running sidecar counts as a running container (so a Job's pod stays Running while its sidecar
 * runs), a stopped one not at all; a sidecar not yet started holds the pod Pending only until it has initialized.
 */
export function getPhase(pod: V1Pod, initStatuses: V1ContainerStatus[], statuses: V1ContainerStatus[], podIsTerminal: boolean): PodPhase {
  const spec = pod.spec!
  const restartPolicy = spec.restartPolicy ?? 'Always'
  let pendingRegularInit = 0
  let pendingSidecars = 0
  let failedInit = 0
  let unknown = 0
  let running = 0
  let waiting = 0
  let stopped = 0
  let succeeded = 0
  for (const c of spec.initContainers ?? []) {
    if (isSidecar(c)) continue
    const s = initStatuses.find((x) => x.name === c.name)
    if (!s || s.state?.running) pendingRegularInit++
    else if (s.state?.terminated) {
      if (s.state.terminated.exitCode !== 0) failedInit++
    } else if (s.state?.waiting) {
      if (s.lastState?.terminated) {
        if (s.lastState.terminated.exitCode !== 0) failedInit++
      } else pendingRegularInit++
    } else pendingRegularInit++
  }
  for (const c of spec.initContainers ?? []) {
    if (!isSidecar(c)) continue
    const s = initStatuses.find((x) => x.name === c.name)
    if (!s) unknown++
    else if (s.state?.running) {
      if (s.started !== true) pendingSidecars++
      running++
    } else if (s.state?.terminated) {
      // A stopped sidecar has no say in the phase.
    } else if (s.state?.waiting) {
      if (!s.lastState?.terminated) {
        pendingSidecars++
        waiting++
      }
    } else {
      pendingSidecars++
      unknown++
    }
  }
  for (const c of spec.containers) {
    const s = statuses.find((x) => x.name === c.name)
    if (!s) unknown++
    else if (s.state?.running) running++
    else if (s.state?.terminated) {
      stopped++
      if (s.state.terminated.exitCode === 0) succeeded++
    } else if (s.state?.waiting) {
      if (s.lastState?.terminated) stopped++
      else waiting++
    } else unknown++
  }
  if (failedInit > 0 && restartPolicy === 'Never') return 'Failed'
  if (pendingRegularInit > 0 || (pendingSidecars > 0 && !hasAnyRegularContainerStarted(statuses)) || waiting > 0) return 'Pending'
  if (running > 0 && unknown === 0) return 'Running'
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (podIsTerminal) return stopped === succeeded ? 'Succeeded' : 'Failed'
    if (restartPolicy === 'Always') return 'Running'
    if (stopped === succeeded) return 'Succeeded'
    if (restartPolicy === 'Never') return 'Failed'
    return 'Running'
  }
  return 'Pending'
}

function podIPs(own: string | undefined, nodeIP: string): Pick<V1PodStatus, 'podIP' | 'podIPs'> {
  const ip = own || nodeIP
  return {podIP: ip, podIPs: [{ip}]}
}

/** The status's observedGeneration, never going back (status manager). */
function observedGeneration(pod: V1Pod, previous: V1PodStatus): Pick<V1PodStatus, 'observedGeneration'> {
  const g = Math.max(pod.metadata?.generation ?? 0, previous.observedGeneration ?? 0)
  return g > 0 ? {observedGeneration: g} : {}
}

/** The pod status the kubelet would write now. */
export function buildPodStatus(input: StatusInput): V1PodStatus {
  const {pod, reported, nodeIP} = input
  // The provider holds the sandbox back (its volumes are not mounted): no PodReadyToStartContainers, no IP.
  const holdsSandbox = !!reported?.conditions?.some((c) => c.type === 'PodReadyToStartContainers' && c.reason === SandboxWaitingReason)
  // Or it killed the sandbox before the pod terminated (a finished pod's sidecars went with it): no longer ready.
  const sandboxKilled = !!reported?.conditions?.some((c) => c.type === 'PodReadyToStartContainers' && c.reason === SandboxKilledReason)
  const sandboxReady = input.sandboxReady && !holdsSandbox && !sandboxKilled
  const now = toSeconds(input.now)
  const apiStatus = pod.status ?? {}
  const previous = input.previous ?? apiStatus
  const spec = pod.spec!
  const hasInit = (spec.initContainers?.length ?? 0) > 0
  const waitingReason = hasInit ? 'PodInitializing' : 'ContainerCreating'
  let initStatuses = convertStatuses(spec.initContainers ?? [], reported?.initContainerStatuses, previous.initContainerStatuses, waitingReason)
  let statuses = convertStatuses(spec.containers, reported?.containerStatuses, previous.containerStatuses, waitingReason)
  // Ephemeral containers (kubectl debug) have their own list, and no say in the phase or readiness.
  let ephemeralStatuses = convertStatuses((spec.ephemeralContainers ?? []) as V1Container[], reported?.ephemeralContainerStatuses, previous.ephemeralContainerStatuses, 'ContainerCreating')
  if (input.override?.noContainers) {
    initStatuses = []
    statuses = []
    ephemeralStatuses = []
  }
  statuses.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))

  // generateAPIPodStatus: phase and conditions come from the containers as the runtime last saw them
  // (on a terminated pod nothing runs: a container still reported running was lost);
  // TerminatePod rewrites the waiting containers and the phase afterwards, and leaves the conditions alone.
  if (input.podIsTerminal) {
    initStatuses = terminateAll(initStatuses, now, (s) => !!s.state?.running)
    statuses = terminateAll(statuses, now, (s) => !!s.state?.running)
  }
  let phase: PodPhase = getPhase(pod, initStatuses, statuses, input.podIsTerminal)
  let reason: string | undefined
  let message: string | undefined
  if (reported?.phase && isTerminalPhase(reported.phase)) {
    phase = reported.phase
    reason = reported.reason
    message = reported.message
  }
  const o = input.override
  if (o && !(o.keepSucceeded && phase === 'Succeeded')) {
    phase = o.phase
    reason = o.reason
    message = o.message
  }
  // The phase generateAPIPodStatus gives, before the status manager holds a terminal one back.
  const generatedPhase = phase
  // A terminal phase is reported only once no process can still be running.
  if (isTerminalPhase(phase) && input.couldHaveRunningContainers && !o) {
    phase = isTerminalPhase(previous.phase) ? (previous.phase as PodPhase) : ((previous.phase as PodPhase | undefined) ?? 'Pending')
    reason = previous.reason
    message = previous.message
  }
  // Pods are not allowed to transition out of terminal phases.
  for (const before of [apiStatus, previous]) {
    if (isTerminalPhase(before.phase) && phase !== before.phase) {
      phase = before.phase
      reason = before.reason
      message = before.message
    }
  }
  if (phase === previous.phase && reason === undefined && message === undefined) {
    reason = previous.reason
    message = previous.message
  }

  // The conditions are generateAPIPodStatus' own, from the phase it gave: a pod whose containers are done (or past its
  // active deadline) while a process may still run is not ready (PodCompleted, PodFailed) as its phase waits for the
  // status manager (mergePodStatus holds the phase back, not the conditions).
  const conditionsPhase = !isTerminalPhase(phase) && isTerminalPhase(generatedPhase) ? generatedPhase : phase
  const containersReady = containersReadyCondition(pod, conditionsPhase, initStatuses, statuses)
  const conditions = withObservedGeneration(
    withTransitionTimes(
      [
        // A resize the provider could not apply (PodResizePending, PodResizeInProgress) comes first, as the kubelet lists it.
        ...(reported?.conditions?.filter((c) => ResizeConditionTypes.has(c.type)) ?? []),
        condition('PodReadyToStartContainers', sandboxReady && !input.podIsTerminal),
        initializedCondition(pod, conditionsPhase, initStatuses, statuses),
        readyCondition(pod, containersReady),
        containersReady,
        condition('PodScheduled', true),
        ...(o?.conditions ?? []),
      ],
      previous.conditions,
      now,
    ),
    pod.metadata?.generation,
  )

  const runTerminatePod = input.podIsTerminal && (!input.beforeTerminatePod || !!o)
  if (runTerminatePod && !input.override?.noContainers) {
    const t = terminatePod(spec, initStatuses, statuses, now)
    initStatuses = t.initStatuses
    statuses = t.statuses
    ephemeralStatuses = terminateAll(ephemeralStatuses, now)
  }
  // TerminatePod: a pod that will run nothing more is never left Pending or Running.
  if (runTerminatePod && !isTerminalPhase(phase) && (!input.couldHaveRunningContainers || o)) phase = 'Failed'

  const status: V1PodStatus = {
    ...observedGeneration(pod, previous),
    phase,
    conditions,
    hostIP: nodeIP,
    hostIPs: [{ip: nodeIP}],
    // A pod on the host network has the node IP once a sandbox existed; one with a network of
    // its own has the address the runtime reports.
    ...(sandboxReady || (input.hadSandbox && !holdsSandbox) || previous.podIP ? podIPs(reported?.podIP, nodeIP) : {}),
    startTime: previous.startTime ? new Date(previous.startTime) : apiStatus.startTime ? new Date(apiStatus.startTime) : now,
    ...(input.override?.noContainers ? {} : {containerStatuses: statuses}),
    ...(hasInit && !input.override?.noContainers ? {initContainerStatuses: initStatuses} : {}),
    ...(ephemeralStatuses.length > 0 ? {ephemeralContainerStatuses: ephemeralStatuses} : {}),
    ...(apiStatus.qosClass ? {qosClass: apiStatus.qosClass} : {}),
  }
  if (reason) status.reason = reason
  if (message) status.message = message
  return status
}
