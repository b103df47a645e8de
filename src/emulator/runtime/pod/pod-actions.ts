import type {V1Pod} from '@kubernetes/client-node'
import {StartFailedReasons, type ContainerState} from '../container/state.js'

/** Waiting reasons of a container that could not be created on a sync: retried on the next sync, not under CrashLoopBackOff. */
const SyncRetryReasons = new Set(['CreateContainerConfigError', 'CreateContainerError', 'ErrImageNeverPull'])
/** A start that failed (the runtime's error): the next sync comes on the pod worker's back-off, and then the crash-loop back-off applies. */

export const DeadlineExceededReason = 'DeadlineExceeded'
export const DeadlineExceededMessage = 'Pod was active on the node longer than the specified deadline'

/** What computePodActions looks at besides the pod: the runtime's containers and where the pod stands. */
export interface ObservedPod {
  containers: readonly ContainerState[]
  /** The init containers completed once (or a regular container ran): they are not run again. */
  initDone: boolean
  /** Nothing will start again: terminal by itself, deadline, or deletion. */
  finished: boolean
  terminating: boolean
  /** When the runtime took the pod: activeDeadlineSeconds counts from status.startTime, or from this. */
  createdAt: number
}

/** The init containers' step of a sync. */
export type InitAction =
  /** Every init container completed (sidecars: started): the pod's containers go on. */
  | {action: 'done'}
  /** Start it, and nothing more on this sync; after a sidecar that runs and has started, decide again. */
  | {action: 'start'; container: ContainerState}
  /** It runs (an init container), or has not started (a sidecar): nothing more on this sync. */
  | {action: 'wait'; container: ContainerState}
  /** It failed and restartPolicy is Never: the pod is done. */
  | {action: 'fail'; container: ContainerState}

/** What a sync does, decided before anything is done (the kubelet's podActions). */
export interface PodActions {
  /** activeDeadlineSeconds: when it passes (epoch ms; Infinity without one). */
  activeDeadlineAt: number
  /** It has passed: the pod fails with DeadlineExceeded and terminates; nothing else is done. */
  deadlineExceeded: boolean
  init: InitAction
  /** Once the init containers are done, in order (sidecars, regular, ephemeral containers). */
  containers: ContainerStep[]
}

export type ContainerStep =
  /** Start it (if its start gate lets it). */
  | {action: 'start'; container: ContainerState}
  /** A regular container that will not run again: it shows its termination, with no reason to wait. */
  | {action: 'settle'; container: ContainerState}

/** Whether a start of the container may go ahead now: it may wait for a config retry or a crash-loop back-off. */
export type StartGate =
  /** Start now; with backOffFrom, the crash-loop back-off counts this restart, judged from the exit at backOffFrom (its next delay grows). */
  | {gate: 'start'; backOffFrom?: number}
  /** A failed config or start is retried at (epoch ms). */
  | {gate: 'retry'; at: number}
  /** CrashLoopBackOff: waitMs left of currentMs. */
  | {gate: 'backOff'; waitMs: number}

function restartPolicy(pod: V1Pod): string {
  return pod.spec?.restartPolicy ?? 'Always'
}

/** When activeDeadlineSeconds passes (Infinity: the pod has none). */
function activeDeadline(pod: V1Pod, createdAt: number): number {
  const ads = pod.spec?.activeDeadlineSeconds
  if (ads === undefined || ads === null) return Infinity
  const start = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : createdAt
  return start + Number(ads) * 1000
}

/** The kubelet's ShouldContainerBeRestarted, with a changed spec's restart and sidecars always restarted. */
function shouldRestart(pod: V1Pod, observed: Pick<ObservedPod, 'finished' | 'terminating'>, c: ContainerState): boolean {
  if (observed.finished || observed.terminating) return false
  if (!c.everRan || c.restartNow) return true
  if (c.kind === 'sidecar') return true
  const policy = restartPolicy(pod)
  if (policy === 'Never') return false
  if (policy === 'OnFailure') return (c.lastExit?.exitCode ?? 0) !== 0
  return true
}

/** The init containers in order: each must exit 0 before the next starts; a sidecar must run and have started. */
export function computeInitAction(pod: V1Pod, observed: ObservedPod): InitAction {
  if (observed.initDone) return {action: 'done'}
  for (const c of observed.containers) {
    if (c.kind === 'sidecar') {
      if (!c.running && !c.stopping) return {action: 'start', container: c}
      if (!c.running || !c.started) return {action: 'wait', container: c}
      continue
    }
    if (c.kind !== 'init') continue
    if (c.running || c.stopping) return {action: 'wait', container: c}
    const last = c.lastExit
    if (last && c.instances > 0 && last.exitCode === 0 && !c.waiting) continue
    if (last && last.exitCode !== 0 && restartPolicy(pod) === 'Never') return {action: 'fail', container: c}
    return {action: 'start', container: c}
  }
  return {action: 'done'}
}

/**
 * What a sync of the pod does (the kubelet's computePodActions): whether
 * the active deadline has passed, the init containers' step, the
 * containers to start and those that stay down. Pure: the runtime does it.
 */
export function computePodActions(pod: V1Pod, observed: ObservedPod, now: number): PodActions {
  const activeDeadlineAt = activeDeadline(pod, observed.createdAt)
  const actions: PodActions = {activeDeadlineAt, deadlineExceeded: now >= activeDeadlineAt, init: {action: 'done'}, containers: []}
  if (observed.finished || actions.deadlineExceeded) return actions
  actions.init = computeInitAction(pod, observed)
  if (actions.init.action !== 'done') return actions
  const idle = (c: ContainerState) => !c.running && !c.stopping
  const start = (container: ContainerState) => actions.containers.push({action: 'start', container})
  for (const c of observed.containers) if (c.kind === 'sidecar' && idle(c)) start(c)
  for (const c of observed.containers) {
    if (c.kind !== 'regular' || !idle(c)) continue
    if (!c.everRan || shouldRestart(pod, observed, c)) start(c)
    else actions.containers.push({action: 'settle', container: c})
  }
  // Ephemeral containers run once the pod's containers run, and never restart.
  for (const c of observed.containers) if (c.kind === 'ephemeral' && idle(c) && !c.everRan) start(c)
  return actions
}

/** Nothing of the pod runs or will restart: the sidecars stop and the pod settles. */
export function podCompleted(pod: V1Pod, observed: ObservedPod): boolean {
  return observed.containers.filter((c) => c.kind === 'regular').every((c) => !c.running && !c.stopping && c.everRan && !c.waiting && !shouldRestart(pod, observed, c))
}

/**
 * Whether a container's start goes ahead now (the kubelet's doBackOff, at
 * start time): a failed config or start waits for the sync's retry, a
 * restart for the crash-loop back-off (not a changed spec's restart, nor a
 * config that failed).
 *
 * A container its probe killed is judged as the kubelet judges it: the sync
 * that kills it starts it again from the status read before the kill, in
 * which the newest ended instance is the one before. With none, it restarts
 * and the back-off does not count it; out of that one's back-off, it
 * restarts and the back-off counts it; in it, it waits from its own exit,
 * like any crash.
 */
export function startGate(c: ContainerState, now: number, configRetryAt: number): StartGate {
  if (c.waiting && (SyncRetryReasons.has(c.waiting.reason) || StartFailedReasons.has(c.waiting.reason)) && now < configRetryAt) return {gate: 'retry', at: configRetryAt}
  const last = c.lastExit
  if (!last || c.instances === 0 || c.restartNow || (c.waiting && SyncRetryReasons.has(c.waiting.reason))) return {gate: 'start'}
  if (c.killedToRestart) {
    const before = c.history[1]
    if (!before) return {gate: 'start'}
    if (c.backoff.remaining(before.finishedAt.getTime(), now) === 0) return {gate: 'start', backOffFrom: before.finishedAt.getTime()}
  }
  const waitMs = c.backoff.remaining(last.finishedAt.getTime(), now)
  return waitMs > 0 ? {gate: 'backOff', waitMs} : {gate: 'start', backOffFrom: last.finishedAt.getTime()}
}
