import type {Clock, ClockTimer} from '../../../common/clock.js'
import type {ContainerState} from '../container/state.js'
import {nextRelist, type SyncClock} from './sync-clock.js'

/**
 * Container exits the kubelet's relist has not seen yet. The kubelet learns
 * that a container ended from its PLEG, which relists the runtime every
 * second: until then the container is running in its status and its pod's
 * syncs (an init container's successor, a restart, the pod's end) wait. An
 * exit the node itself caused is not here: the kill that waits for it sees
 * it, as the kubelet's kill does.
 */
export class UnseenExits {
  private readonly pending = new Map<ContainerState, {timer: ClockTimer; see: () => void; at: number}>()

  constructor(
    private readonly clock: Clock,
    private readonly sync: SyncClock,
  ) {}

  /** How many exits wait for their relist (tests: none once the pod is gone). */
  get size(): number {
    return this.pending.size
  }

  /**
   * The exit of c's instance, at endedAt (epoch ms; now by default): `see` applies it at the first relist after it (at
   * once with no relist period, or where that relist has passed already: the instance's output drained past it).
   */
  add(c: ContainerState, see: () => void, endedAt?: number): void {
    this.seeNow(c)
    const now = this.clock.now()
    const at = nextRelist((endedAt ?? now) + 1, this.sync)
    if (this.sync.relistPeriodMs <= 0 || at <= now) return see()
    const timer = this.clock.setTimeout(() => {
      this.pending.delete(c)
      see()
    }, at - now)
    this.pending.set(c, {timer, see, at})
  }

  /**
   * Applies the exits whose relist has come. A report made at or after a relist shows what that relist saw, whichever
   * timer the event loop runs first: under load a start's report (pod-status.ts) can run before an exit's timer due at
   * the same relist, and would show running a container that had ended before it.
   */
  seeDue(now = this.clock.now()): void {
    for (const [c, p] of [...this.pending]) if (p.at <= now) this.seeNow(c)
  }

  /** Applies c's unseen exit now (a stop, or the pod's end, acts on the container as it is). */
  seeNow(c: ContainerState): void {
    const p = this.pending.get(c)
    if (!p) return
    this.clock.clearTimeout(p.timer)
    this.pending.delete(c)
    p.see()
  }

  /** Applies every unseen exit now. */
  seeAll(): void {
    for (const c of [...this.pending.keys()]) this.seeNow(c)
  }
}
