import {RealClock, type Clock} from '../../common/clock.js'

/**
 * Exponential backoff with a cap, reset on success. The kubelet uses 200 ms
 * to 7 s for lease renewals and registration.
 */
export class Backoff {
  private current: number

  constructor(
    readonly initialMs: number,
    readonly maxMs: number,
    readonly factor = 2,
  ) {
    this.current = initialMs
  }

  /** The delay to wait now; the next one grows. */
  next(): number {
    const d = this.current
    this.current = Math.min(this.maxMs, this.current * this.factor)
    return d
  }

  reset(): void {
    this.current = this.initialMs
  }
}

/** A sleep on the clock that ends early when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = RealClock): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const t = clock.setTimeout(done, ms)
    function done() {
      clock.clearTimeout(t)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, {once: true})
  })
}
