import {setFlagsFromString} from 'node:v8'
import {runInNewContext} from 'node:vm'
import type {RefillHolds} from './refill-holds.js'

/**
 * How long after the last pod start or stop ends the heap is trimmed: past
 * the status writes that report a burst (a relist, then a write per pod).
 */
export const DefaultHeapTrimQuietMs = 5_000

/**
 * V8's full collection as a function, run twice, or undefined where it
 * cannot be had. A context made after the flag is set has `gc` (what jest
 * does for its heap figures); the process keeps no other trace of the flag.
 * Twice: after a burst of garbage, one collection left V8 most of the old
 * generation's pages (150 MiB committed, 110 to 140 MiB after it), a
 * second one right after gave them back (5 to 20 MiB).
 */
export function fullCollection(): (() => void) | undefined {
  try {
    setFlagsFromString('--expose-gc')
    const gc: unknown = runInNewContext('gc')
    if (typeof gc !== 'function') return undefined
    const collect = gc as () => void
    return () => {
      collect()
      collect()
    }
  } catch {
    return undefined
  }
}

/**
 * Gives the heap of a burst back once the node is quiet. A burst of pod
 * starts or stops grows V8's heap by tens of MiB of short-lived objects;
 * V8 returns it on its own only when it judges the process idle, which on
 * a node with pods (probes, relists, watches) took 30 s and more, so a
 * node that had just started 100 pods held twice the memory it needed.
 * A trim (fullCollection), run once no start or stop has been under way
 * for quietMs (each new one puts it off), returns most of it in one pause
 * of tens of milliseconds at a time nothing waits on the loop.
 */
export class HeapTrim {
  private readonly unlisten: () => void
  private timer: NodeJS.Timeout | undefined
  /** A start or stop happened since the last trim. */
  private dirty = false
  private closed = false
  /** Collections run so far. */
  trims = 0

  constructor(
    /** The pod starts and stops under way (process-provider.ts holds them). */
    private readonly holds: RefillHolds,
    private readonly collect: (() => void) | undefined = fullCollection(),
    private readonly quietMs = DefaultHeapTrimQuietMs,
  ) {
    this.unlisten = holds.listen({
      began: () => {
        this.dirty = true
        this.disarm()
      },
      ended: () => this.arm(),
    })
  }

  /**
   * A burst made by no start or stop (the node's own start: its modules, its
   * first lists and watches) is given back the same way, once quiet: the
   * heap an idle node started with was twice what it needed (V8's pages of
   * the start, 61 MiB, against 35 after a trim).
   */
  trimWhenQuiet(): void {
    this.dirty = true
    this.arm()
  }

  close(): void {
    this.closed = true
    this.disarm()
    this.unlisten()
  }

  private arm(): void {
    this.disarm()
    if (this.closed || !this.collect) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      // Still held (a start that hangs stops holding after DefaultRefillHoldMs): looked at again a quiet time later.
      if (this.holds.releaseAt() !== undefined) return this.arm()
      if (!this.dirty) return
      this.dirty = false
      this.trims++
      this.collect!()
    }, this.quietMs)
    this.timer.unref()
  }

  private disarm(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}
