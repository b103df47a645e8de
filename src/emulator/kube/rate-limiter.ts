/** The kubelet's client defaults: --kube-api-qps 50, --kube-api-burst 100. */
export const DefaultKubeApiQps = 50
export const DefaultKubeApiBurst = 100
/** The kubelet's event client defaults: --event-qps 50, --event-burst 100 (a budget of its own). */
export const DefaultEventQps = 50
export const DefaultEventBurst = 100

/**
 * A token bucket, like client-go's flowcontrol: up to `burst` requests at
 * once, refilled at `qps` per second. qps <= 0 means unthrottled. Waiters are
 * served in order with one timer at a time, so a burst of callers costs no
 * more timers than one.
 */
export class RateLimiter {
  private tokens: number
  private last = Date.now()
  private readonly waiters: (() => void)[] = []
  private timer: NodeJS.Timeout | undefined

  constructor(
    readonly qps: number,
    readonly burst: number,
  ) {
    this.tokens = burst
  }

  private refill(): void {
    const now = Date.now()
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps)
    this.last = now
  }

  acquire(): Promise<void> {
    if (this.qps <= 0) return Promise.resolve()
    this.refill()
    if (this.waiters.length === 0 && this.tokens >= 1) {
      this.tokens -= 1
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      this.waiters.push(resolve)
      this.schedule()
    })
  }

  private schedule(): void {
    if (this.timer || this.waiters.length === 0) return
    this.refill()
    const wait = this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.qps) * 1000)
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.refill()
      while (this.tokens >= 1 && this.waiters.length > 0) {
        this.tokens -= 1
        this.waiters.shift()!()
      }
      this.schedule()
    }, wait)
  }

  get pending(): number {
    return this.waiters.length
  }
}
