/**
 * The kubelet's clocks that a pod's observable status follows (pleg/generic.go,
 * pod_workers.go, volumemanager): what it reports, and when it tries again, is
 * decided on these ticks rather than at the moment something happens.
 */

/** The PLEG's relist period: a container's start is seen, and reported, at the next relist. */
export const DefaultRelistPeriodMs = 1_000
/** The pod worker's backOffPeriod: a pod whose sync failed (config error, container in back-off) is synced again after this. */
export const DefaultSyncBackoffMs = 10_000
/** workerBackOffPeriodJitterFactor: each back-off is up to this fraction longer. */
export const DefaultSyncBackoffJitter = 0.5
/** The volume manager's mount retries (exponentialbackoff): 500 ms, doubling, to 2m2s. */
export const DefaultMountRetryInitialMs = 500
export const DefaultMountRetryMaxMs = 122_000

export interface SyncClock {
  relistPeriodMs: number
  syncBackoffMs: number
  jitter: number
}

export const DefaultSyncClock: SyncClock = {relistPeriodMs: DefaultRelistPeriodMs, syncBackoffMs: DefaultSyncBackoffMs, jitter: DefaultSyncBackoffJitter}

/** The first relist at or after `at` (epoch ms): relists tick on the node's clock, not the container's. */
export function nextRelist(at: number, clock: SyncClock): number {
  const p = clock.relistPeriodMs
  return p > 0 ? Math.ceil(at / p) * p : at
}

/** How long until a failed sync is retried: wait.Jitter(backOffPeriod, jitter). */
export function syncBackoffDelay(clock: SyncClock, random: () => number = Math.random): number {
  return clock.syncBackoffMs * (1 + random() * clock.jitter)
}
