import {afterEach, beforeEach, describe, expect, jest, test} from '@jest/globals'
import {getHeapSpaceStatistics} from 'node:v8'
import {DefaultRefillHoldMs, RefillHolds} from '../../src/common/refill-holds.js'
import {DefaultHeapTrimQuietMs, fullCollection, HeapTrim} from '../../src/common/heap-trim.js'

describe('HeapTrim: one full collection once starts and stops are quiet', () => {
  let collected: number
  /** The pod starts and stops under way, as the provider holds them. */
  let holds: RefillHolds
  const trim = (quietMs = DefaultHeapTrimQuietMs) => {
    holds = new RefillHolds(() => Date.now())
    return new HeapTrim(holds, () => collected++, quietMs)
  }

  beforeEach(() => {
    jest.useFakeTimers({now: 1_000_000})
    collected = 0
  })
  afterEach(() => {
    jest.useRealTimers()
  })

  test('a burst of holds: one collection, quietMs after the last one ended, none before', () => {
    const t = trim()
    const ends = Array.from({length: 100}, () => holds.add())
    jest.advanceTimersByTime(DefaultRefillHoldMs / 4)
    expect(collected).toBe(0)
    for (const end of ends.slice(0, 99)) end()
    jest.advanceTimersByTime(DefaultRefillHoldMs / 4)
    // One still under way holds it.
    expect(collected).toBe(0)
    ends[99]!()
    ends[99]!()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs - 1)
    expect(collected).toBe(0)
    jest.advanceTimersByTime(1)
    expect(collected).toBe(1)
    expect(t.trims).toBe(1)
    // Quiet with nothing new: no more collections.
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs * 10)
    expect(collected).toBe(1)
  })

  test('a start within the quiet time puts the collection off until it is over', () => {
    trim()
    holds.add()()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs - 100)
    const end = holds.add()
    jest.advanceTimersByTime(200)
    expect(collected).toBe(0)
    end()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs)
    expect(collected).toBe(1)
    // The next burst gets its own.
    holds.add()()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs)
    expect(collected).toBe(2)
  })

  test('a hold that never ends stops holding after DefaultRefillHoldMs', () => {
    trim()
    holds.add()
    holds.add()()
    jest.advanceTimersByTime(DefaultRefillHoldMs - 1)
    expect(collected).toBe(0)
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs + 1)
    expect(collected).toBe(1)
  })

  test("trimWhenQuiet: the node's own start is trimmed once quiet, put off by a start as a burst is", () => {
    const t = trim()
    t.trimWhenQuiet()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs - 100)
    expect(collected).toBe(0)
    const end = holds.add()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs)
    expect(collected).toBe(0)
    end()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs)
    expect(collected).toBe(1)
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs * 10)
    expect(collected).toBe(1)
  })

  test('closed: nothing is collected, and no timer is left', () => {
    const t = trim()
    holds.add()()
    t.trimWhenQuiet()
    t.close()
    // It no longer listens: a hold that ends later arms nothing.
    holds.add()()
    jest.advanceTimersByTime(DefaultHeapTrimQuietMs * 2)
    expect(collected).toBe(0)
    expect(jest.getTimerCount()).toBe(0)
  })
})

describe('fullCollection', () => {
  const oldSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!.space_size

  test("is V8's full collection: the garbage made just before it is gone after it", () => {
    const collect = fullCollection()
    expect(typeof collect).toBe('function')
    collect!()
    const base = process.memoryUsage().heapUsed
    const holder: {junk?: unknown[]} = {junk: Array.from({length: 300_000}, (_, i) => ({i, s: `x${i}`}))}
    const grown = process.memoryUsage().heapUsed - base
    expect(grown).toBeGreaterThan(10 * 1024 * 1024)
    delete holder.junk
    collect!()
    // A young-generation scavenge alone would leave what already reached the old generation.
    expect(process.memoryUsage().heapUsed - base).toBeLessThan(grown / 4)
  })

  test("gives the old generation's pages back, not only its objects", async () => {
    const collect = fullCollection()!
    collect()
    const base = oldSpace()
    // Garbage that lived long enough to be promoted: kept across turns of the loop, as a burst's requests are.
    const kept: unknown[][] = []
    for (let round = 0; round < 20; round++) {
      kept.push(Array.from({length: 50_000}, (_, i) => ({i, s: `y${i}`, a: [i]})))
      await new Promise((r) => setImmediate(r))
    }
    const grown = oldSpace() - base
    expect(grown).toBeGreaterThan(20 * 1024 * 1024)
    kept.length = 0
    collect()
    expect(oldSpace() - base).toBeLessThan(grown / 4)
  })
})
