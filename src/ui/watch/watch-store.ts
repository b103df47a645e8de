import type {V1Pod} from '@kubernetes/client-node'
import type {WatchEventType} from '../../kubectl/pod-watch.js'
import {sortPodsByName} from './sort.js'

/** Redraws of the live `pods -w` table are coalesced to at most ten a second. */
export const DefaultWatchRedrawMs = 100

/** The live table's pods by UID, published at most once per interval. */
export class PodWatchStore {
  private readonly pods = new Map<string, V1Pod>()
  private snapshot: V1Pod[] = []
  private readonly listeners = new Set<() => void>()
  private timer: NodeJS.Timeout | undefined
  private lastFlush = -Infinity

  constructor(
    initial: V1Pod[],
    private readonly intervalMs = DefaultWatchRedrawMs,
  ) {
    for (const p of initial) this.pods.set(p.metadata?.uid ?? p.metadata?.name ?? '', p)
    this.snapshot = sortPodsByName([...this.pods.values()])
  }

  apply = (type: WatchEventType, pod: V1Pod): void => {
    const key = pod.metadata?.uid ?? pod.metadata?.name ?? ''
    if (type === 'DELETED') this.pods.delete(key)
    else this.pods.set(key, pod)
    if (this.timer) return
    const wait = this.lastFlush + this.intervalMs - Date.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  /** Re-publishes as it is, so ages move. */
  touch(): void {
    this.snapshot = this.snapshot.slice()
    for (const l of this.listeners) l()
  }

  private flush(): void {
    this.timer = undefined
    this.lastFlush = Date.now()
    this.snapshot = sortPodsByName([...this.pods.values()])
    for (const l of this.listeners) l()
  }

  subscribe = (l: () => void) => {
    this.listeners.add(l)
    return () => this.listeners.delete(l)
  }

  getSnapshot = () => this.snapshot

  dispose(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.listeners.clear()
  }
}
