/**
 * At most `limit` holders at once; the others wait in arrival order, and a
 * released slot goes to the first of them. limit <= 0 means no limit. close()
 * lets every waiter through at once (each checks its owner's state after), so
 * nothing waits on a closed owner.
 */
export class InFlightLimit {
  private held = 0
  private readonly waiters: (() => void)[] = []
  private closed = false

  constructor(readonly limit: number) {}

  /** A free slot now (the function that gives it back), or undefined when every slot is held or others wait. */
  tryAcquire(): (() => void) | undefined {
    if (this.closed || this.limit <= 0) return () => undefined
    if (this.held >= this.limit || this.waiters.length > 0) return undefined
    this.held++
    return this.releaser()
  }

  /** Resolves, once a slot is free, with the function that gives it back (calling it again does nothing). */
  async acquire(): Promise<() => void> {
    const now = this.tryAcquire()
    if (now) return now
    // The slot is handed over by the release that frees it: held stays as it is.
    await new Promise<void>((resolve) => this.waiters.push(resolve))
    return this.closed ? () => undefined : this.releaser()
  }

  /** Callers waiting for a slot. */
  get waiting(): number {
    return this.waiters.length
  }

  /** Slots held. */
  get inFlight(): number {
    return this.held
  }

  close(): void {
    this.closed = true
    this.held = 0
    for (const resolve of this.waiters.splice(0)) resolve()
  }

  private releaser(): () => void {
    let released = false
    return () => {
      if (released || this.closed) return
      released = true
      const next = this.waiters.shift()
      if (next) next()
      else this.held--
    }
  }
}
