import type {Clock, ClockTimer} from '../../src/common/clock.js'

interface FakeTimer {
  at: number
  callback: () => void
  /** An interval's period. */
  every?: number
}

/** A clock that moves only when the test says: advance() runs every timer that falls due, in time order. */
export class FakeClock implements Clock {
  private t: number
  private nextId = 0
  private readonly timers = new Map<number, FakeTimer>()

  constructor(start = Date.UTC(2026, 11, 1, 10, 0, 0)) {
    this.t = start
  }

  now(): number {
    return this.t
  }

  setTimeout(callback: () => void, ms: number): ClockTimer {
    return this.add({at: this.t + Math.max(0, ms), callback})
  }

  setInterval(callback: () => void, ms: number): ClockTimer {
    return this.add({at: this.t + Math.max(1, ms), callback, every: Math.max(1, ms)})
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer) this.timers.delete((timer as {id: number}).id)
  }

  /** Timers waiting. */
  get pending(): number {
    return this.timers.size
  }

  /** When the next timer falls due (Infinity: none). */
  get nextAt(): number {
    return Math.min(Infinity, ...[...this.timers.values()].map((x) => x.at))
  }

  /** Moves the time on by ms, firing what falls due on the way (awaiting the promises they start between timers). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0]
      if (!due) break
      const [id, x] = due
      this.t = Math.max(this.t, x.at)
      if (x.every) x.at += x.every
      else this.timers.delete(id)
      x.callback()
      await settle()
    }
    this.t = end
    await settle()
  }

  private add(timer: FakeTimer): ClockTimer {
    const id = ++this.nextId
    this.timers.set(id, timer)
    return {id} as ClockTimer
  }
}

/** Lets pending promise callbacks run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}
