import type {Clock} from '../../common/clock.js'
import {InFlightLimit} from '../../common/in-flight-limit.js'

/**
 * Status writes (and final deletes) in flight at once. The kubelet's status manager writes one pod at a time
 * (syncBatch); a pod's write is built when its turn comes, so under a burst a pod's changes while it waited become one
 * write: a graceful delete's new generation and the terminal status that follows a prompt kill, for one. A few at once
 * keep an API server busy where one at a time would leave it waiting on round trips.
 */
export const DefaultStatusWritesInFlight = 4
/** A write that has not answered within this long gives its turn to the next (a request on a dead connection can hang for minutes). */
export const DefaultStatusWriteTurnMs = 10_000

/** The status manager's turns to write: at most `limit` at once (0: no limit), each given back when its write ends or after maxTurnMs. */
export class WriteTurns {
  private readonly limit: InFlightLimit

  constructor(
    limit: number,
    private readonly clock: Clock,
    private readonly maxTurnMs = DefaultStatusWriteTurnMs,
  ) {
    this.limit = new InFlightLimit(limit)
  }

  /** A turn now (the function that ends it), or undefined while every turn is taken or others wait for one. */
  now(): (() => void) | undefined {
    const release = this.limit.tryAcquire()
    return release && this.timed(release)
  }

  /** The next turn, in the order asked for. */
  async next(): Promise<() => void> {
    return this.timed(await this.limit.acquire())
  }

  /** Lets every write waiting for a turn go (each checks that the manager stopped). */
  close(): void {
    this.limit.close()
  }

  private timed(release: () => void): () => void {
    const timer = this.clock.setTimeout(release, this.maxTurnMs)
    timer.unref?.()
    return () => {
      this.clock.clearTimeout(timer)
      release()
    }
  }
}
