/** The kubelet's container restart backoff (flowcontrol.NewBackOff(10s, 300s), no jitter). */
export const DefaultCrashLoopInitialMs = 10_000
export const DefaultCrashLoopMaxMs = 300_000
/** An exit more than this long after the last (re)start forgets the backoff. */
export const DefaultCrashLoopResetMs = 600_000

export interface CrashLoopTiming {
  initialMs: number
  maxMs: number
  resetMs: number
}

export const DefaultCrashLoopTiming: CrashLoopTiming = {initialMs: DefaultCrashLoopInitialMs, maxMs: DefaultCrashLoopMaxMs, resetMs: DefaultCrashLoopResetMs}

/**
 * One container's backoff entry: the first restart is immediate, then 10 s,
 * 20 s, 40 s ... 300 s after each exit; reset after 10 minutes of running.
 */
export class CrashLoopBackoff {
  private delay = 0
  private lastUpdate = 0

  constructor(private readonly timing: CrashLoopTiming = DefaultCrashLoopTiming) {}

  /**
   * For a container that exited at finishedAt and should restart: how many
   * ms to wait still (in backoff), or 0 to restart now, which also grows the
   * next delay.
   */
  check(finishedAt: number, now = Date.now()): number {
    const wait = this.remaining(finishedAt, now)
    if (wait > 0) return wait
    this.restarted(finishedAt, now)
    return 0
  }

  /** How many ms the container that exited at finishedAt still waits (0: it may restart now). Changes nothing. */
  remaining(finishedAt: number, now: number): number {
    const delay = this.delay && finishedAt - this.lastUpdate > this.timing.resetMs ? 0 : this.delay
    return delay && now - finishedAt < delay ? delay - (now - finishedAt) : 0
  }

  /** It restarts now: the next delay doubles (up to maxMs), or starts over after resetMs of running. */
  restarted(finishedAt: number, now: number): void {
    if (this.delay && finishedAt - this.lastUpdate > this.timing.resetMs) this.delay = 0
    this.delay = this.delay ? Math.min(this.delay * 2, this.timing.maxMs) : this.timing.initialMs
    this.lastUpdate = now
  }

  /** The delay in force (0 before the first restart). */
  get currentMs(): number {
    return this.delay
  }
}

/** A duration as Go prints it: 10s, 1m20s, 5m0s, 1.5s. */
export function goDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor((ms % 3_600_000) / 60_000)
  const s = (ms % 60_000) / 1000
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')}s`
  if (h) return `${h}h${m}m${sec}`
  if (m) return `${m}m${sec}`
  return sec
}
