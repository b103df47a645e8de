/**
 * How many warm entries the sandbox pool keeps, from the recent start rate:
 * as many as pods started in the last window (a burst asks for more next
 * time), never fewer than the floor nor more than the cap; a node that
 * stops starting pods falls back to its floor once the window has passed.
 * Refills wait for a pause in the starts, so making entries never competes
 * with a burst that is being started. Pure: the time is given.
 */

/** Entries kept however quiet the node is: the next pod's start is warm. */
export const DefaultPoolFloor = 1
/** Entries never exceeded: each holds a namespace, a veth on the bridge and an address of the pod CIDR. */
export const DefaultPoolCap = 16
/** Starts counted for the target: those of the last minute. */
export const DefaultPoolWindowMs = 60_000
/** A refill begins once no pod has started for this long. */
export const DefaultPoolQuietMs = 500

export interface PoolSize {
  floor: number
  cap: number
}

export interface PoolSizingOptions extends Partial<PoolSize> {
  windowMs?: number
  quietMs?: number
}

export class PoolSizing {
  readonly floor: number
  readonly cap: number
  readonly windowMs: number
  readonly quietMs: number
  /** The latest starts, oldest first; at most cap of them (more would not raise the target). */
  private readonly starts: number[] = []

  constructor(opts: PoolSizingOptions = {}) {
    this.cap = Math.max(0, Math.floor(opts.cap ?? DefaultPoolCap))
    this.floor = Math.min(this.cap, Math.max(0, Math.floor(opts.floor ?? DefaultPoolFloor)))
    this.windowMs = opts.windowMs ?? DefaultPoolWindowMs
    this.quietMs = opts.quietMs ?? DefaultPoolQuietMs
  }

  /** A pod asked for its sandbox at now. */
  noteStart(now: number): void {
    this.starts.push(now)
    if (this.starts.length > this.cap) this.starts.shift()
  }

  private recent(now: number): number {
    return this.starts.filter((t) => now - t < this.windowMs).length
  }

  /** How many entries the pool should hold now. */
  target(now: number): number {
    return Math.min(this.cap, Math.max(this.floor, this.recent(now)))
  }

  /** No start within the quiet time: entries may be made now. */
  quiet(now: number): boolean {
    const last = this.starts.at(-1)
    return last === undefined || now - last >= this.quietMs
  }

  /**
   * When the pool should be looked at again, after now: the end of the
   * quiet time while starts come, then each time a start leaves the window
   * (the target falls); undefined when nothing will change by itself.
   */
  nextChangeAt(now: number): number | undefined {
    const last = this.starts.at(-1)
    if (last === undefined) return undefined
    if (now - last < this.quietMs) return last + this.quietMs
    const leaving = this.starts.find((t) => now - t < this.windowMs)
    return leaving === undefined ? undefined : leaving + this.windowMs
  }

  /** Forgets starts that left the window (the list stays bounded either way). */
  prune(now: number): void {
    while (this.starts.length > 0 && now - this.starts[0] >= this.windowMs) this.starts.shift()
  }
}
