import {describe, expect, test} from '@jest/globals'
import {conflist, podIndependentChain, podSpecificChain} from '../../src/emulator/runtime/network/config.js'
import {DefaultPoolCap, DefaultPoolFloor, DefaultPoolMemoryMs, DefaultPoolWindowMs, poolCapFor, PoolSizing} from '../../src/emulator/runtime/network/pool-sizing.js'
import {PoolRetryInitialMs, SandboxPool} from '../../src/emulator/runtime/network/sandbox-pool.js'
import {DefaultRefillHoldMs, RefillHolds} from '../../src/common/refill-holds.js'
import {subresourcesFor} from '../../src/emulator/server/auth.js'
import {nodeMetrics} from '../../src/emulator/server/node-metrics.js'
import {MetricsRoute} from '../../src/emulator/server/routes/metrics.js'
import {findRoute} from '../../src/emulator/server/routes/table.js'
import {FakeClock, settle} from './fake-clock.js'

/** Entries are numbers; made and destroyed ones are counted, and making can be made to fail or to hang. */
class FakeMaker {
  next = 0
  readonly alive = new Set<number>()
  destroyed = 0
  failing = false
  /** Resolves the make in progress, when hold is set. */
  hold = false
  private waiting: (() => void)[] = []

  async make(): Promise<number> {
    if (this.hold) await new Promise<void>((resolve) => this.waiting.push(resolve))
    if (this.failing) throw new Error('no plugins')
    const e = ++this.next
    this.alive.add(e)
    return e
  }

  async destroy(e: number): Promise<void> {
    if (!this.alive.delete(e)) throw new Error(`entry ${e} destroyed twice or never made`)
    this.destroyed++
  }

  release(): void {
    for (const w of this.waiting.splice(0)) w()
  }
}

const window = 10_000
const quiet = 500

function pool(opts: {floor?: number; cap?: number} = {}) {
  const clock = new FakeClock()
  const maker = new FakeMaker()
  // A burst is remembered as long as it is counted: these tests are of the pool, not of its memory.
  const sizing = new PoolSizing({floor: opts.floor ?? 1, cap: opts.cap ?? 4, windowMs: window, memoryMs: window, quietMs: quiet})
  const holds = new RefillHolds(() => clock.now())
  const p = new SandboxPool<number>(maker, sizing, clock, holds)
  return {clock, maker, sizing, p, holds}
}

describe('the warm pool: sizing from the start rate', () => {
  test('defaults: a floor of at least one and a cap above it', () => {
    expect(DefaultPoolFloor).toBeGreaterThanOrEqual(1)
    expect(DefaultPoolCap).toBeGreaterThan(DefaultPoolFloor)
    const s = new PoolSizing()
    expect(s.target(0)).toBe(DefaultPoolFloor)
  })

  test('the target is the starts of the window, between floor and cap; it falls back to the floor once they leave it', () => {
    const s = new PoolSizing({floor: 1, cap: 3, windowMs: window, memoryMs: window, quietMs: quiet})
    expect(s.target(0)).toBe(1)
    s.noteStart(1000)
    s.noteStart(1100)
    expect(s.target(1200)).toBe(2)
    for (let i = 0; i < 10; i++) s.noteStart(1200 + i)
    expect(s.target(1300)).toBe(3)
    expect(s.target(1210 + window)).toBe(1)
  })

  test('quiet only after quietMs without a start; the next change is the end of the quiet, then each burst leaving the memory', () => {
    const memory = 3 * window
    const s = new PoolSizing({floor: 0, cap: 4, windowMs: window, memoryMs: memory, quietMs: quiet})
    expect(s.quiet(0)).toBe(true)
    expect(s.nextChangeAt(0)).toBeUndefined()
    s.noteStart(1000)
    s.noteStart(2000)
    expect(s.quiet(2100)).toBe(false)
    expect(s.nextChangeAt(2100)).toBe(2000 + quiet)
    // The burst of two, reached at 2000, is the target until it leaves the memory.
    expect(s.nextChangeAt(2000 + quiet)).toBe(2000 + memory)
    // A lone start later: the burst of two still rules; then the one of one, until it goes too.
    s.noteStart(2000 + 2 * window)
    expect(s.target(2000 + 2 * window + quiet)).toBe(2)
    expect(s.nextChangeAt(2000 + 2 * window + quiet)).toBe(2000 + memory)
    expect(s.target(2000 + memory)).toBe(1)
    expect(s.nextChangeAt(2000 + memory)).toBe(2000 + 2 * window + memory)
    expect(s.target(2000 + 2 * window + memory)).toBe(0)
    expect(s.nextChangeAt(2000 + 2 * window + memory)).toBeUndefined()
  })

  test('defaults: a burst counts the starts of a minute and is remembered for ten', () => {
    expect(DefaultPoolWindowMs).toBe(60_000)
    expect(DefaultPoolMemoryMs).toBe(600_000)
    const s = new PoolSizing({floor: 1, cap: 128})
    for (let i = 0; i < 100; i++) s.noteStart(i * 100)
    // A rollout's next burst minutes later finds the pool as large as the last one.
    expect(s.target(5 * 60_000)).toBe(100)
    expect(s.target(9_900 + DefaultPoolMemoryMs - 1)).toBe(100)
    expect(s.target(9_900 + DefaultPoolMemoryMs)).toBe(1)
  })

  test('a burst is remembered past its window: the largest one of the memory is the target, a smaller one later does not lower it', () => {
    const memory = 4 * window
    const s = new PoolSizing({floor: 1, cap: 10, windowMs: window, memoryMs: memory, quietMs: quiet})
    for (let i = 0; i < 6; i++) s.noteStart(1000 + i)
    expect(s.target(1000 + window + 1)).toBe(6)
    // Starts spread wider than a window are not one burst.
    s.noteStart(1000 + window + 10)
    s.noteStart(1000 + 2 * window + 20)
    expect(s.target(1000 + 2 * window + 30)).toBe(6)
    // A burst of three after the one of six: six rules until it leaves the memory, then three.
    for (let i = 0; i < 3; i++) s.noteStart(1100 + 3 * window + i)
    expect(s.target(1100 + 3 * window + 10)).toBe(6)
    expect(s.target(1005 + memory)).toBe(3)
    expect(s.target(1102 + 3 * window + memory)).toBe(1)
  })

  test("the cap leaves the node its pods' addresses: a /24 has 253 beside the gateway, less maxPods", () => {
    expect(poolCapFor(128, '10.244.0.0/24', 110)).toBe(128)
    expect(poolCapFor(200, '10.244.0.0/24', 110)).toBe(143)
    expect(poolCapFor(128, '10.244.0.0/25', 110)).toBe(15)
    expect(poolCapFor(128, '10.244.0.0/26', 110)).toBe(0)
    expect(poolCapFor(16, '10.244.0.0/24', undefined)).toBe(16)
  })

  test('the starts it keeps are bounded by the cap, however many come', () => {
    const s = new PoolSizing({floor: 0, cap: 2, windowMs: window, quietMs: quiet})
    for (let i = 0; i < 1000; i++) s.noteStart(i * (window / 7))
    const lists = s as unknown as {starts: number[]; peaks: unknown[]}
    expect(lists.starts.length).toBe(2)
    expect(lists.peaks.length).toBeLessThanOrEqual(2)
    s.prune(10_000_000_000)
    expect(lists.starts.length).toBe(0)
    expect(lists.peaks.length).toBe(0)
  })

  test('a floor above the cap is the cap', () => {
    expect(new PoolSizing({floor: 5, cap: 2}).floor).toBe(2)
  })
})

describe('the warm pool: leasing', () => {
  test('fills to its floor at start, off any start; a lease takes an entry once, and the quiet after it refills', async () => {
    const {clock, maker, p} = pool({floor: 1, cap: 4})
    await p.start()
    await settle()
    expect(p.figures()).toMatchObject({ready: 1, target: 1})
    const e = p.lease()
    expect(e).toBe(1)
    expect(p.figures()).toMatchObject({ready: 0, hits: 1, misses: 0})
    // No refill before the quiet: the start path is not competed with.
    await clock.advance(quiet - 1)
    expect(maker.next).toBe(1)
    await clock.advance(1)
    expect(p.figures().ready).toBe(1)
    expect(maker.next).toBe(2)
    // Leased entries are the pod's: never handed out again.
    const seen = new Set([e])
    for (let i = 0; i < 3; i++) {
      const x = p.lease()
      if (x !== undefined) {
        expect(seen.has(x)).toBe(false)
        seen.add(x)
      }
    }
    await p.close()
  })

  test('a burst larger than the pool drains it: the rest miss; then idle refills it to the rate, never past the cap', async () => {
    const {clock, maker, p} = pool({floor: 1, cap: 4})
    await p.start()
    await settle()
    const got = Array.from({length: 10}, () => p.lease())
    expect(got.filter((x) => x !== undefined)).toEqual([1])
    expect(p.figures()).toMatchObject({hits: 1, misses: 9, ready: 0, target: 4})
    await clock.advance(quiet)
    expect(p.figures()).toMatchObject({ready: 4, making: 0})
    expect(maker.alive.size - 1).toBe(4)
    await clock.advance(window / 2)
    expect(p.figures().ready).toBe(4)
    await p.close()
  })

  test('a node that stops starting pods shrinks to its floor, and then holds no timer', async () => {
    const {clock, maker, p} = pool({floor: 1, cap: 4})
    await p.start()
    await settle()
    for (let i = 0; i < 4; i++) p.lease()
    await clock.advance(quiet)
    expect(p.figures().ready).toBe(4)
    await clock.advance(window)
    expect(p.figures()).toMatchObject({ready: 1, target: 1})
    expect(maker.destroyed).toBe(3)
    expect(clock.pending).toBe(0)
    await p.close()
  })

  test("a start under way holds the refill past its lease's quiet: entries are made once it ended and the quiet after it passed", async () => {
    const {clock, maker, p, holds} = pool({floor: 1, cap: 4})
    await p.start()
    await settle()
    const ends = Array.from({length: 3}, () => holds.add())
    for (let i = 0; i < 3; i++) p.lease()
    await clock.advance(quiet * 4)
    // The leases are long quiet, but the starts (their sandboxes) go on: nothing is made beside them.
    expect(maker.next).toBe(1)
    ends[0]!()
    ends[1]!()
    await clock.advance(quiet * 4)
    expect(maker.next).toBe(1)
    ends[2]!()
    ends[2]!()
    await clock.advance(quiet - 1)
    expect(maker.next).toBe(1)
    await clock.advance(1)
    expect(p.figures()).toMatchObject({ready: 3, target: 3})
    await p.close()
  })

  test('a start that hangs holds the refill for DefaultRefillHoldMs at most', async () => {
    const clock = new FakeClock()
    const maker = new FakeMaker()
    // The burst is remembered past the hold, so the target is still the burst when the hold ends.
    const holds = new RefillHolds(() => clock.now())
    const p = new SandboxPool<number>(maker, new PoolSizing({floor: 1, cap: 4, windowMs: 6 * DefaultRefillHoldMs, memoryMs: 6 * DefaultRefillHoldMs, quietMs: quiet}), clock, holds)
    await p.start()
    await settle()
    const end = holds.add()
    p.lease()
    p.lease()
    await clock.advance(DefaultRefillHoldMs - 1)
    expect(maker.next).toBe(1)
    await clock.advance(1)
    expect(p.figures()).toMatchObject({ready: 2, target: 2})
    end()
    await p.close()
    expect(clock.pending).toBe(0)
  })

  test('starts during a refill stop it after the entry being made', async () => {
    const {clock, maker, p} = pool({floor: 0, cap: 4})
    await p.start()
    for (let i = 0; i < 4; i++) p.lease()
    maker.hold = true
    await clock.advance(quiet)
    expect(p.figures().making).toBe(1)
    p.lease()
    maker.hold = false
    maker.release()
    await settle()
    expect(p.figures()).toMatchObject({ready: 1, making: 0})
    await clock.advance(quiet)
    expect(p.figures().ready).toBe(4)
    await p.close()
  })

  test('an entry that cannot be made is retried on a back-off, not in a loop; the pool recovers', async () => {
    const {clock, maker, p} = pool({floor: 2, cap: 4})
    maker.failing = true
    await p.start()
    await settle()
    expect(p.figures()).toMatchObject({ready: 0, failures: 1})
    await clock.advance(PoolRetryInitialMs - 1)
    expect(p.figures().failures).toBe(1)
    await clock.advance(1)
    expect(p.figures().failures).toBe(2)
    maker.failing = false
    await clock.advance(2 * PoolRetryInitialMs)
    expect(p.figures()).toMatchObject({ready: 2, failures: 2})
    await p.close()
  })

  test('an entry found unusable at lease is destroyed and the next one taken; the pool is not left with it', async () => {
    const {clock, maker, p} = pool({floor: 0, cap: 3})
    await p.start()
    for (let i = 0; i < 3; i++) p.lease()
    await clock.advance(quiet)
    expect(p.figures().ready).toBe(3)
    const broken = 1
    const e = p.lease((x) => x !== broken)
    await settle()
    expect(e).toBe(2)
    expect(maker.alive.has(broken)).toBe(false)
    expect(p.figures()).toMatchObject({broken: 1, ready: 1})
    // Only broken ones: a miss, and the caller makes its own.
    expect(p.lease(() => false)).toBeUndefined()
    await settle()
    expect(p.figures()).toMatchObject({broken: 2, ready: 0})
    await p.close()
    expect([...maker.alive]).toEqual([2])
  })

  test('close destroys every entry it holds and the one being made, and leases nothing after', async () => {
    const {clock, maker, p, holds} = pool({floor: 0, cap: 3})
    await p.start()
    for (let i = 0; i < 3; i++) p.lease()
    await clock.advance(quiet)
    expect(p.figures().ready).toBe(3)
    p.lease()
    await clock.advance(quiet)
    maker.hold = true
    await clock.advance(0)
    const closing = p.close()
    maker.hold = false
    maker.release()
    await closing
    // The one leased is the caller's; every other is gone.
    expect(maker.alive.size).toBe(1)
    expect(p.lease()).toBeUndefined()
    // It no longer listens to the node's starts and stops: one that ends schedules nothing.
    holds.add()()
    expect(clock.pending).toBe(0)
  })

  test('entries reclaimed after a restart are kept up to the cap; the rest are destroyed', async () => {
    const clock = new FakeClock()
    const maker = new FakeMaker()
    for (let i = 0; i < 5; i++) void maker.make()
    await settle()
    const p = new SandboxPool<number>(maker, new PoolSizing({floor: 1, cap: 3, windowMs: window, quietMs: quiet}), clock, new RefillHolds(() => clock.now()))
    await p.start([1, 2, 3, 4, 5])
    await settle()
    // Two over the cap at once; then, above the target (the floor), the quiet node shrinks the three kept to it.
    expect(maker.destroyed).toBe(4)
    expect(p.figures()).toMatchObject({ready: 1})
    await p.close()
    expect(maker.alive.size).toBe(0)
  })
})

describe('the warm pool: the chain split and the figures', () => {
  const list = conflist({nodeName: 'n', podCidr: '10.244.1.0/24', gateway: '10.244.1.1', bridge: 'vnodex', ipamDir: '/s/ipam', routes: []})

  test('the pool runs bridge with host-local ahead; a pod adds portmap only when it has mappings', () => {
    expect(podIndependentChain(list).plugins.map((p) => p.type)).toEqual(['bridge'])
    expect(podSpecificChain(list, []).plugins).toEqual([])
    const mapped = podSpecificChain(list, [{hostPort: 8080, containerPort: 80, protocol: 'tcp'}])
    expect(mapped.plugins).toEqual([expect.objectContaining({type: 'portmap', runtimeConfig: {portMappings: [{hostPort: 8080, containerPort: 80, protocol: 'tcp'}]}})])
  })

  test('/metrics has the pool families, and none without a pool', () => {
    const text = nodeMetrics({pool: {ready: 2, making: 1, target: 3, floor: 1, cap: 16, hits: 5, misses: 7, failures: 0, broken: 1}}, new Date(1000))
    expect(text).toContain('vnode_sandbox_pool_entries{state="ready"} 2 1000')
    expect(text).toContain('vnode_sandbox_pool_leases_total{result="miss"} 7 1000')
    expect(text).toContain('vnode_sandbox_pool_cap_entries 16 1000')
    expect(nodeMetrics({})).not.toContain('vnode_sandbox_pool')
    // The heap trims beside them, with a pool or without.
    expect(nodeMetrics({heapTrims: 3}, new Date(1000))).toContain('vnode_heap_trims_total 3 1000')
    expect(nodeMetrics({pool: {ready: 0, making: 0, target: 0, floor: 0, cap: 0, hits: 0, misses: 0, failures: 0, broken: 0}, heapTrims: 0}, new Date(1000))).toContain('vnode_heap_trims_total 0 1000')
    expect(text).not.toContain('vnode_heap_trims_total')
    // Served at the kubelet's /metrics, authorized as its metrics subresource.
    expect(findRoute('/metrics')).toBe(MetricsRoute)
    expect(findRoute('/metrics/')).toBe(MetricsRoute)
    expect(subresourcesFor('/metrics')).toEqual(['metrics'])
  })
})
