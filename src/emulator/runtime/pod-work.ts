import {HeapTrim} from '../../common/heap-trim.js'
import {RefillHolds} from '../../common/refill-holds.js'
import type {PodNetwork} from './network/pod-network.js'
import {nodeFifoMaker, type FifoMaker} from './process/instance-io.js'

/**
 * The node's work beside its pods', kept off a pod's start or stop: the
 * warm pool's refill (the pod network's), the reserve of output pipes and
 * the heap trim all listen to one set of holds, taken around each start
 * and stop (`holding`). The holds are the pod network's when there is
 * one (its pool was made with them).
 */
export class PodWork {
  private readonly holds: RefillHolds
  /** The instances' output pipes, a reserve of them made ahead in `<state>/pipes` (process/fifo.ts). */
  readonly fifos: FifoMaker
  /** The heap a burst of starts or stops grew is given back once they are over. */
  private readonly heapTrim: HeapTrim

  constructor(stateDir: string, network?: PodNetwork) {
    this.holds = network?.refillHolds ?? new RefillHolds(() => Date.now())
    this.fifos = nodeFifoMaker(stateDir, this.holds)
    this.heapTrim = new HeapTrim(this.holds)
    // The node's start is a burst of its own.
    this.heapTrim.trimWhenQuiet()
  }

  /** A pod's start or stop: no refill, top-up or trim beside it. */
  async holding<T>(work: () => Promise<T>): Promise<T> {
    const release = this.holds.add()
    try {
      return await work()
    } finally {
      release()
    }
  }

  /** Full collections run to give a burst's heap back (/metrics). */
  get heapTrims(): number {
    return this.heapTrim.trims
  }

  /** The pipes' reserve goes once a top-up under way is over; the trim stops listening. (The pod network closes its pool.) */
  async close(): Promise<void> {
    await this.fifos.close()
    this.heapTrim.close()
  }
}
