import type {Clock, ClockTimer} from '../../../common/clock.js'
import type {RefillHolds} from '../../../common/refill-holds.js'
import {SerialRunner} from '../../../common/serial-runner.js'
import {Backoff} from '../../kube/backoff.js'
import type {SandboxPoolFigures} from '../../provider/pool.js'
import {PoolSizing} from './pool-sizing.js'

/**
 * The warm pool: entries made ahead, off the start path, each leased to one
 * pod at most. lease() is synchronous, so two pods can never take the same
 * entry; what it returns is the caller's (to attach or to destroy), never
 * the pool's again. The pool refills, and shrinks to its target, only in
 * the quiet after starts and stops (pool-sizing.ts), one entry at a time; close()
 * destroys every entry it still holds and waits for the one being made.
 */

/** What the pool needs of whoever makes its entries (pod-network.ts: a namespace, its veth, an address). */
export interface PoolEntryMaker<E> {
  make(): Promise<E>
  destroy(entry: E): Promise<void>
}

/** After a failed make, the next try waits 1 s, doubling to 5 min (a host that lost its plugins is not hammered). */
export const PoolRetryInitialMs = 1_000
export const PoolRetryMaxMs = 300_000

export class SandboxPool<E> {
  private readonly ready: E[] = []
  private making = 0
  private hits = 0
  private misses = 0
  private failures = 0
  private broken = 0
  /** Broken entries being destroyed in the background (lease does not wait for them). */
  private readonly destroying = new Set<Promise<void>>()
  private closed = false
  private retryAt = 0
  private timer: ClockTimer | undefined
  private readonly retry = new Backoff(PoolRetryInitialMs, PoolRetryMaxMs)
  private readonly runner: SerialRunner
  private readonly unlisten: () => void

  constructor(
    private readonly maker: PoolEntryMaker<E>,
    private readonly sizing: PoolSizing,
    private readonly clock: Clock,
    /**
     * The pod starts and stops under way (process-provider.ts holds them around each: a start's sandbox, its
     * containers' spawns, until its start is seen; a stop's kill and its sandbox's removal). The pool makes no entry
     * while one is, nor in the quiet time after the last one ends: a burst's starts outlast its leases by the time its
     * sandboxes take, and a burst of deletions, which often follows a burst of starts at once (a rollout, a test's
     * teardown), needs the CPU as much.
     */
    private readonly holds: RefillHolds,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.runner = new SerialRunner(() => this.pass(), {active: () => !this.closed, idle: () => this.schedule()})
    this.unlisten = holds.listen({
      ended: () => {
        this.sizing.noteHoldEnd(this.clock.now())
        this.schedule()
      },
    })
  }

  /** Starts the pool with the entries a previous run left ready (more than the cap are destroyed), then fills it. */
  async start(reclaimed: E[] = []): Promise<void> {
    for (const e of reclaimed) {
      if (this.ready.length < this.sizing.cap && !this.closed) this.ready.push(e)
      else await this.maker.destroy(e).catch(() => undefined)
    }
    void this.runner.run().catch(() => undefined)
  }

  /**
   * A ready entry for a pod starting now, or undefined (the caller makes its
   * own). An entry that is no longer usable (its namespace removed behind
   * vnode's back) is destroyed, in the background, and the next one taken.
   */
  lease(usable: (e: E) => boolean = () => true): E | undefined {
    if (this.closed) return undefined
    this.sizing.noteStart(this.clock.now())
    let e = this.ready.shift()
    while (e !== undefined && !usable(e)) {
      this.broken++
      // Off the start path; close() waits for it.
      const d = this.maker.destroy(e).catch(() => undefined)
      this.destroying.add(d)
      void d.then(() => this.destroying.delete(d))
      e = this.ready.shift()
    }
    if (e === undefined) this.misses++
    else this.hits++
    this.schedule()
    return e
  }

  figures(): SandboxPoolFigures {
    const now = this.clock.now()
    return {
      ready: this.ready.length,
      making: this.making,
      target: this.sizing.target(now),
      floor: this.sizing.floor,
      cap: this.sizing.cap,
      hits: this.hits,
      misses: this.misses,
      failures: this.failures,
      broken: this.broken,
    }
  }

  /** One pass: shrink to the target, or fill to it, while no start comes. */
  private async pass(): Promise<void> {
    while (!this.closed) {
      const now = this.clock.now()
      this.sizing.prune(now)
      if (!this.sizing.quiet(now) || this.holds.releaseAt(now) !== undefined) return
      const target = this.sizing.target(now)
      if (this.ready.length > target) {
        await this.maker.destroy(this.ready.pop()!).catch(() => undefined)
        continue
      }
      if (this.ready.length + this.making >= target || now < this.retryAt) return
      this.making++
      try {
        const e = await this.maker.make()
        // Made while the node stopped: it is not the pool's to keep.
        if (this.closed) await this.maker.destroy(e).catch(() => undefined)
        else this.ready.push(e)
        this.retry.reset()
        this.retryAt = 0
      } catch (error) {
        this.failures++
        const wait = this.retry.next()
        this.retryAt = this.clock.now() + wait
        this.log(`sandbox pool: an entry could not be made (next try in ${Math.round(wait / 1000)} s): ${(error as Error).message}`)
      } finally {
        this.making--
      }
    }
  }

  /** One timer at most: the next time the target or the quiet changes, or a retry is due. */
  private schedule(): void {
    this.clock.clearTimeout(this.timer)
    this.timer = undefined
    if (this.closed || this.runner.running) return
    const now = this.clock.now()
    const held = this.holds.releaseAt(now)
    const due = [this.sizing.nextChangeAt(now), this.ready.length < this.sizing.target(now) && this.retryAt > now ? this.retryAt : undefined, held].filter((t): t is number => t !== undefined)
    // Below the target and quiet already: fill now (a start that came during the last pass).
    if (this.ready.length !== this.sizing.target(now) && this.sizing.quiet(now) && held === undefined && now >= this.retryAt) due.push(now)
    if (due.length === 0) return
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined
        void this.runner.run().catch(() => undefined)
      },
      Math.max(0, Math.min(...due) - now),
    )
    this.timer.unref?.()
  }

  /** The node stops: no entry is made any more, every entry held is destroyed. */
  async close(): Promise<void> {
    this.closed = true
    this.unlisten()
    this.clock.clearTimeout(this.timer)
    this.timer = undefined
    await this.runner.running?.catch(() => undefined)
    await Promise.all([...this.destroying])
    const held = this.ready.splice(0)
    await Promise.all(held.map((e) => this.maker.destroy(e).catch(() => undefined)))
  }
}
