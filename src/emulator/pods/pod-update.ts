import type {V1Pod, V1PodStatus} from '@kubernetes/client-node'
import type {Clock} from '../../common/clock.js'
import type {EventType} from '../kube/events.js'
import type {PodLifecycleHandler} from '../provider/handler.js'
import type {StatusOverride} from './status.js'

/**
 * What a pod worker (pod-worker.ts) is handed and relies on: the updates and
 * how a pending one merges with the next, the status manager's and the
 * controller's ports, and the worker's timing defaults.
 */

/** How often a running pod is checked against the provider (the kubelet's syncFrequency, jittered by half). */
export const DefaultResyncIntervalMs = 60_000
export const ResyncJitterFactor = 0.5
/** Retry after a failed provider call (the kubelet's backOffPeriod is 10 s). */
export const DefaultWorkerRetryInitialMs = 1_000
export const DefaultWorkerRetryMaxMs = 10_000
/** Whatever happens, a pod gets at least this much time to stop ("we always supply a grace period of 1"). */
export const MinimumGracePeriodSeconds = 1

export type PodWorkState = 'sync' | 'terminating' | 'terminated'
export type UpdateType = 'create' | 'update' | 'sync' | 'kill'

export interface PodUpdate {
  type: UpdateType
  pod: V1Pod
  /** A kill's grace override (node shutdown); only ever shortens the grace. */
  gracePeriodOverride?: number
  /** The pod-level outcome to report when terminated (rejection, shutdown). */
  statusOverride?: StatusOverride
  /** The pod is gone from the API (REMOVE): kill it and forget it. */
  removed?: boolean
}

/** What a worker needs from the status manager. */
export interface WorkerStatusPort {
  setStarting(uid: string, starting: boolean): void
  setSandboxReady(uid: string, ready: boolean): void
  setReported(uid: string, status: V1PodStatus): void
  /** The worker acts on the pod's status as it stands: write it now, with no transition hold. */
  writeNow(uid: string): void
  /** The provider's last report of the pod's status (notifyPods). */
  reported(uid: string): V1PodStatus | undefined
  /** The worker is terminated: write the terminal status, then the final DELETE if the pod is being deleted. */
  terminate(uid: string, override?: StatusOverride): Promise<void>
}

export interface WorkerHost {
  provider: PodLifecycleHandler
  status: WorkerStatusPort
  event(pod: V1Pod, type: EventType, reason: string, message: string): void
  /** The provider took the pod on (its first create): for what a node does once per pod, such as virtual-kubelet's events. */
  created?(pod: V1Pod): void
  /** A removed pod finished terminating: drop the worker. */
  forget(uid: string): void
  resyncIntervalMs?: number
  retryInitialMs?: number
  retryMaxMs?: number
  /** The clock of the worker's timestamps, retries and resyncs (the real one by default). */
  clock?: Clock
}

/** Merges a new update into the pending slot: the newest pod wins, a kill is never dropped, grace only shrinks. */
export function mergeUpdates(pending: PodUpdate | undefined, next: PodUpdate): PodUpdate {
  if (!pending) return next
  const graces = [pending.gracePeriodOverride, next.gracePeriodOverride].filter((g): g is number => g !== undefined)
  return {
    type: pending.type === 'kill' || next.type === 'kill' ? 'kill' : pending.type === 'create' && next.type !== 'create' ? 'create' : next.type,
    pod: next.pod,
    gracePeriodOverride: graces.length ? Math.min(...graces) : undefined,
    statusOverride: pending.statusOverride ?? next.statusOverride,
    removed: pending.removed || next.removed,
  }
}
