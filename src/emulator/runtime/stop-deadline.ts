/**
 * When a container's stop must be over (epoch ms): it only ever comes
 * closer (a delete with a shorter grace, the pod's own deadline), and
 * whoever waits for it wakes when it passes, wherever it moved meanwhile.
 */
export class StopDeadline {
  private atMs = Infinity
  private timer: NodeJS.Timeout | undefined
  private readonly waiters = new Set<() => void>()

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
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.waiters.size === 0 || !Number.isFinite(this.atMs)) return
    const left = this.atMs - Date.now()
    if (left <= 0) return this.wake()
    this.timer = setTimeout(() => this.arm(), left)
  }

  private wake(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    for (const w of this.waiters) w()
    this.waiters.clear()
  }
}
