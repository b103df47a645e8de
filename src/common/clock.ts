/**
 * The one source of time for the node's decisions (the pod runtime, the
 * probe workers, the status manager): injected, so that a test can drive
 * them with a clock of its own, and the real one by default.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number
  setTimeout(callback: () => void, ms: number): ClockTimer
  setInterval(callback: () => void, ms: number): ClockTimer
  /** Clears a timeout or an interval of this clock; undefined is nothing to clear. */
  clearTimeout(timer: ClockTimer | undefined): void
}

/** A timer a Clock made. unref lets the process exit while it waits (real timers only). */
export interface ClockTimer {
  unref?(): unknown
}

/** The system clock and Node's timers. */
export const RealClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  setInterval: (callback, ms) => setInterval(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
}

/** Resolves after ms on the clock. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms))
}
