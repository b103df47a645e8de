import {RealClock, type Clock, type ClockTimer} from './clock.js'

export interface WakeTimerOptions {
  /** The runtime's injected clock; the real one by default. */
  clock?: Clock
  /** The timer alone does not keep the process alive. */
  unref?: boolean
}

/**
 * A timer whose deadline only ever moves earlier: asking to be woken later
 * than the deadline already set changes nothing, asking for sooner moves it.
 * It fires once per deadline; after firing (or `cancel`) there is none.
 */
export class WakeTimer {
  private timer: ClockTimer | undefined
  private dueAt = Infinity

  constructor(
    private readonly fire: () => void,
    private readonly opts: WakeTimerOptions = {},
  ) {}

  private get clock(): Clock {
    return this.opts.clock ?? RealClock
  }

  /** The deadline (epoch ms), Infinity when none is set. */
  get at(): number {
    return this.dueAt
  }

  /** A deadline is set and has not fired yet. */
  get armed(): boolean {
    return this.timer !== undefined
  }

  /** Fire no later than `at` (epoch ms); an earlier deadline already set stands. */
  wakeBy(at: number): void {
    if (at >= this.dueAt) return
    this.clock.clearTimeout(this.timer)
    this.dueAt = at
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined
        this.dueAt = Infinity
        this.fire()
      },
      Math.max(0, at - this.clock.now()),
    )
    if (this.opts.unref) this.timer.unref?.()
  }

  /** No deadline any more. */
  cancel(): void {
    this.clock.clearTimeout(this.timer)
    this.timer = undefined
    this.dueAt = Infinity
  }
}
