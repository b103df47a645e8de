/**
 * A pod's start or stop under way holds the node's background work (the
 * warm pool's refill, the spare output pipes, the heap trim) this long at
 * most: a refill's plugins take the CPU a burst's sandboxes need, but a
 * start that hangs (a postStart hook that runs for minutes) or a stop's
 * long grace period must not keep the pool empty for good.
 */
export const DefaultRefillHoldMs = 10_000

/** What background work waits for: a pod's start or stop began, or one ended. */
export interface RefillListener {
  began?(): void
  ended?(): void
}

/**
 * The pod starts and stops under way, each from when it began: the one
 * signal the node's background work waits for (process-provider.ts holds
 * it around each start and stop; the warm pool, the spare pipes and the
 * heap trim listen). add() returns a hold's end, releaseAt() says when the
 * holds stop holding.
 */
export class RefillHolds {
  private readonly began = new Map<number, number>()
  private readonly listeners = new Set<RefillListener>()
  private tokens = 0

  constructor(
    private readonly now: () => number,
    private readonly maxMs = DefaultRefillHoldMs,
  ) {}

  /** A hold begins now; the returned function ends it (once). Listeners hear both. */
  add(): () => void {
    const token = ++this.tokens
    this.began.set(token, this.now())
    for (const l of [...this.listeners]) l.began?.()
    return () => {
      if (!this.began.delete(token)) return
      for (const l of [...this.listeners]) l.ended?.()
    }
  }

  /** Hears every hold's beginning and end from now on; returns the function that stops it. */
  listen(listener: RefillListener): () => void {
    this.listeners.add(listener)
    return () => void this.listeners.delete(listener)
  }

  /** Holds not yet ended (however old). */
  get size(): number {
    return this.began.size
  }

  /** When the holds under way stop holding (the earliest end of one still in its time); undefined when none holds. */
  releaseAt(now = this.now()): number | undefined {
    const ends = [...this.began.values()].filter((began) => now - began < this.maxMs).map((began) => began + this.maxMs)
    return ends.length > 0 ? Math.min(...ends) : undefined
  }

  clear(): void {
    this.began.clear()
  }
}
