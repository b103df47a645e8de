/**
 * How many warm entries the sandbox pool keeps, from the recent starts:
 * as many as the largest burst of the last few minutes (the starts within
 * one window), never fewer than the floor nor more than the cap. A burst
 * asks for as many entries for the next one; a node that stops starting
 * pods falls back to its floor once its bursts are out of memory. Refills
 * wait for a pause in the starts and stops, so making entries never
 * competes with a burst that is being started or deleted. Pure: the time
 * is given.
 */

/** Entries kept however quiet the node is: the next pod's start is warm. */
export const DefaultPoolFloor = 1
/**
 * Entries never exceeded: each holds a namespace (about 150 KiB of kernel
 * memory), a veth on the bridge and an address of the pod CIDR. Enough for
 * a 100-pod burst. Unless a cap is given, the addresses the node's pods
 * need come first (poolCapFor).
 */
export const DefaultPoolCap = 128
/** Starts within this window are one burst. */
export const DefaultPoolWindowMs = 60_000
/** How long the largest burst keeps the pool at its size: a developer's next rollout is minutes away. */
export const DefaultPoolMemoryMs = 600_000
/** A refill begins once no pod has started for this long. */
export const DefaultPoolQuietMs = 500

export interface PoolSize {
  floor: number
  cap: number
}

export interface PoolSizingOptions extends Partial<PoolSize> {
  /** The node's pod capacity: their addresses come first (poolCapFor). */
  maxPods?: number
  windowMs?: number
  memoryMs?: number
  quietMs?: number
}

/** A burst's size when it was reached. */
interface Peak {
  at: number
  count: number
}

/**
 * The cap a pod CIDR allows beside maxPods pods: every pod's address comes
 * first, so a full node never finds its addresses held by idle entries.
 */
export function poolCapFor(cap: number, podCidr: string, maxPods: number | undefined): number {
  const bits = Number(podCidr.split('/')[1])
  if (!Number.isInteger(bits) || maxPods === undefined) return cap
  // The network and broadcast addresses and the gateway are no pod's.
  const addresses = Math.max(0, 2 ** (32 - bits) - 3)
  return Math.max(0, Math.min(cap, addresses - maxPods))
}

export class PoolSizing {
  readonly floor: number
  readonly cap: number
  readonly windowMs: number
  readonly memoryMs: number
  readonly quietMs: number
  /** The latest starts, oldest first; at most cap of them (more would not raise the target). */
  private readonly starts: number[] = []
  /**
   * The bursts' sizes still remembered, oldest first, each larger than every
   * later one (a later, larger burst replaces the smaller ones before it):
   * the first is the target. Sizes are 1..cap, so at most cap of them.
   */
  private readonly peaks: Peak[] = []
  /** When the last hold of a start or a stop ended (noteHoldEnd). */
  private lastEnd: number | undefined

  constructor(opts: PoolSizingOptions = {}) {
    this.cap = Math.max(0, Math.floor(opts.cap ?? DefaultPoolCap))
    this.floor = Math.min(this.cap, Math.max(0, Math.floor(opts.floor ?? DefaultPoolFloor)))
    this.windowMs = opts.windowMs ?? DefaultPoolWindowMs
    this.memoryMs = Math.max(this.windowMs, opts.memoryMs ?? DefaultPoolMemoryMs)
    this.quietMs = opts.quietMs ?? DefaultPoolQuietMs
  }

  /** A pod asked for its sandbox at now. */
  noteStart(now: number): void {
    this.starts.push(now)
    if (this.starts.length > this.cap) this.starts.shift()
    const count = this.starts.filter((t) => now - t < this.windowMs).length
    while (this.peaks.length > 0 && this.peaks.at(-1)!.count <= count) this.peaks.pop()
    this.peaks.push({at: now, count})
  }

  /** The largest burst still remembered at now. */
  private peak(now: number): number {
    return this.peaks.find((p) => now - p.at < this.memoryMs)?.count ?? 0
  }

  /** How many entries the pool should hold now. */
  target(now: number): number {
    return Math.min(this.cap, Math.max(this.floor, this.peak(now)))
  }

  /** A pod's start (seen, or given up) or stop ended: the quiet time runs from the later of this and the last start. */
  noteHoldEnd(now: number): void {
    this.lastEnd = Math.max(this.lastEnd ?? now, now)
  }

  /** The latest start (each start is the last peak when it comes), or end of a start or a stop. */
  private lastActivity(): number | undefined {
    const start = this.peaks.at(-1)?.at
    if (start === undefined || this.lastEnd === undefined) return start ?? this.lastEnd
    return Math.max(start, this.lastEnd)
  }

  /** No start, and no end of a start or a stop, within the quiet time: entries may be made now. */
  quiet(now: number): boolean {
    const last = this.lastActivity()
    return last === undefined || now - last >= this.quietMs
  }

  /**
   * When the pool should be looked at again, after now: the end of the
   * quiet time while starts come, then each time a burst leaves the memory
   * (the target falls); undefined when nothing will change by itself.
   */
  nextChangeAt(now: number): number | undefined {
    const last = this.lastActivity()
    if (last === undefined) return undefined
    if (now - last < this.quietMs) return last + this.quietMs
    const leaving = this.peaks.find((p) => now - p.at < this.memoryMs)
    return leaving === undefined ? undefined : leaving.at + this.memoryMs
  }

  /** Forgets starts that left the window and bursts that left the memory (both lists stay bounded either way). */
  prune(now: number): void {
    while (this.starts.length > 0 && now - this.starts[0] >= this.windowMs) this.starts.shift()
    while (this.peaks.length > 0 && now - this.peaks[0].at >= this.memoryMs) this.peaks.shift()
  }
}
