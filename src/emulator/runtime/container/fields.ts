import type {V1Container, V1ContainerState, V1ContainerStatus} from '@kubernetes/client-node'
import type {ContainerProcess} from '../process/container-process.js'
import type {ProbeWorker} from '../probes/worker.js'

/**
 * What the runtime knows of a container (state.ts holds it and draws its
 * transitions): its kinds, its finished instances, what keeps it waiting.
 */

/** ephemeral: a `kubectl debug` container, added by a spec update, run once and never restarted. */
export type ContainerKind = 'init' | 'sidecar' | 'regular' | 'ephemeral'

/** One finished instance, newest first in ContainerState.history. */
export interface Termination {
  exitCode: number
  signal?: number
  reason: string
  message?: string
  startedAt?: Date
  finishedAt: Date
  containerID?: string
}

export interface Waiting {
  reason: string
  message?: string
}

/** What a ContainerState knows; see its getters. */
export interface ContainerFields {
  spec?: V1Container
  proc?: ContainerProcess
  containerID?: string
  instances: number
  waiting?: Waiting
  /** The waiting reason to show once the current instance is gone (PostStartHookError). */
  pendingWaiting?: Waiting
  /**
   * The kubelet's reason cache: what a sync found keeping the container from
   * starting (CrashLoopBackOff), shown from the next sync on. The kubelet
   * writes a pod's status at the start of a sync, from what the syncs before
   * it found, so the sync that finds a crashed container in back-off still
   * reports it terminated.
   */
  syncReason?: Waiting
  history: Termination[]
  started: boolean
  ready: boolean
  imageID: string
  probes: ProbeWorker[]
  stopping?: Promise<void>
  restartNow: boolean
  /**
   * The status when its probe killed it to restart it, shown until the next
   * instance is created or the container waits: the kubelet kills and
   * restarts in one sync, whose status was read before the kill, so the
   * killed instance is never reported ended.
   */
  shownUntilRestart?: V1ContainerStatus
  runningImage?: string
  logPath?: string
  terminationMessageFile?: string
  /**
   * The status as it was before the current instance started, shown until the
   * relist that sees the start (sync-clock.ts): an instance that ends before
   * then is never reported running, as on the kubelet.
   */
  unobserved?: {until: number; status: V1ContainerStatus}
}

/** A finished instance as the API shows it (state.terminated, lastState.terminated). */
export function terminatedState(t: Termination): NonNullable<V1ContainerState['terminated']> {
  return {
    exitCode: t.exitCode,
    // No CRI reports the signal: the kubelet leaves `signal` unset and says it in exitCode (128 + n).
    reason: t.reason,
    ...(t.message ? {message: t.message} : {}),
    ...(t.startedAt ? {startedAt: t.startedAt} : {}),
    finishedAt: t.finishedAt,
    ...(t.containerID ? {containerID: t.containerID} : {}),
  }
}
