/**
 * What `kubectl vnode kill` reports while it works: the kill service emits
 * these and the ui prints them, so neither imports the other.
 */

export interface KillTarget {
  namespace: string
  name: string
}

export type KillProgress =
  | {kind: 'requested'; target: KillTarget; uid: string; gracePeriodSeconds: number; removed: boolean; elapsedMs: number}
  | {kind: 'not-found'; target: KillTarget}
  | {kind: 'failed'; target: KillTarget; error: unknown}
  | {kind: 'status'; target: KillTarget; status: string; elapsedMs: number}
  | {kind: 'container'; target: KillTarget; container: string; exitCode?: number; signal?: number; reason?: string; elapsedMs: number}
  | {kind: 'event'; target: KillTarget; reason: string; message: string; elapsedMs: number}
  | {kind: 'removed'; target: KillTarget; elapsedMs: number}
  | {kind: 'timeout'; target: KillTarget; elapsedMs: number}
