/**
 * A pod's start or stop under way holds a background refill (the warm
 * pool's entries, the spare output pipes) this long at most: a start that
 * hangs must not keep the refill off for good.
 */
export const DefaultRefillHoldMs = 10_000

/**
 * The work under way that holds a refill, each piece from when it began:
 * add() returns its release, releaseAt() says when the holds stop holding.
 */
export class RefillHolds {
  private readonly began = new Map<number, number>()
  private tokens = 0

  constructor(
    private readonly now: () => number,
    private readonly maxMs = DefaultRefillHoldMs,
  ) {}

  /** A hold begins now; the returned function ends it (once), then calls onEnd. */
  add(onEnd: () => void): () => void {
    const token = ++this.tokens
    this.began.set(token, this.now())
    return () => {
      if (this.began.delete(token)) onEnd()
    }
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
