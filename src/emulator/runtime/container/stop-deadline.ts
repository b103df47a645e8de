import {RealClock, type Clock} from '../../../common/clock.js'
import {WakeTimer} from '../../../common/wake-timer.js'

/**
 * When a container's stop must be over (epoch ms): it only ever comes
 * closer (a delete with a shorter grace, the pod's own deadline), and
 * whoever waits for it wakes when it passes, wherever it moved meanwhile.
 */
export class StopDeadline {
  private atMs = Infinity
  /** Armed only while someone waits. */
  private readonly timer: WakeTimer
  private readonly waiters = new Set<() => void>()

  constructor(private readonly clock: Clock = RealClock) {
    this.timer = new WakeTimer(() => this.arm(), {clock})
  }

  get at(): number {
    return this.atMs
  }

  /** Moves the deadline to `at` if that is sooner. */
  moveTo(at: number): void {
    if (at >= this.atMs) return
    this.atMs = at
    this.arm()
  }

  /** Resolves once the deadline has passed (never, while there is none). */
  passed(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.add(resolve)
      this.arm()
    })
  }

  /** The stop is over: no deadline, and nobody left waiting. */
  reset(): void {
    this.atMs = Infinity
    this.wake()
  }

  private arm(): void {
    if (this.waiters.size === 0 || !Number.isFinite(this.atMs)) return this.timer.cancel()
    // Checked again when the timer fires: it wakes nobody before the deadline has passed.
    if (this.atMs - this.clock.now() <= 0) return this.wake()
    this.timer.wakeBy(this.atMs)
  }

  private wake(): void {
    this.timer.cancel()
    for (const w of this.waiters) w()
    this.waiters.clear()
  }
}
