import {describe, expect, test} from '@jest/globals'
import type {ContainerState} from '../../src/emulator/runtime/container/state.js'
import {UnseenExits} from '../../src/emulator/runtime/pod/unseen-exits.js'
import {FakeClock} from './fake-clock.js'

const container = (name: string) => ({name}) as unknown as ContainerState

describe('UnseenExits: an exit is seen at the next relist', () => {
  test('seen at the relist tick after the exit, not before; seeNow and seeAll apply at once; nothing is held after', async () => {
    const clock = new FakeClock()
    const exits = new UnseenExits(clock, {relistPeriodMs: 1_000, syncBackoffMs: 10_000, jitter: 0})
    await clock.advance(1_000 - (clock.now() % 1_000) + 300)
    const seen: string[] = []
    const a = container('a')
    const b = container('b')
    exits.add(a, () => seen.push('a'))
    await clock.advance(699)
    expect(seen).toEqual([])
    await clock.advance(1)
    expect(seen).toEqual(['a'])
    exits.add(a, () => seen.push('a2'))
    exits.add(b, () => seen.push('b'))
    expect(exits.size).toBe(2)
    exits.seeNow(b)
    expect(seen).toEqual(['a', 'b'])
    exits.seeAll()
    expect(seen).toEqual(['a', 'b', 'a2'])
    expect(exits.size).toBe(0)
    expect(clock.pending).toBe(0)
  })

  test('seeDue applies the exits whose relist has come though their timers have not run yet (a report at that relist runs first); later ones wait', () => {
    // A clock whose timers run only when the test says: the event loop under load, with the relist's moment passed.
    let now = Date.UTC(2026, 11, 1, 10, 0, 0, 300)
    const timers = new Set<number>()
    let next = 0
    const clock = {
      now: () => now,
      setTimeout: () => {
        timers.add(++next)
        return {id: next} as unknown as ReturnType<FakeClock['setTimeout']>
      },
      setInterval: () => ({}) as ReturnType<FakeClock['setTimeout']>,
      clearTimeout: (t: unknown) => void timers.delete((t as {id: number}).id),
    }
    const exits = new UnseenExits(clock, {relistPeriodMs: 1_000, syncBackoffMs: 10_000, jitter: 0})
    const seen: string[] = []
    exits.add(container('a'), () => seen.push('a'))
    exits.seeDue()
    expect(seen).toEqual([])
    // The relist a's exit waits for has come: a report now applies it first.
    now = Date.UTC(2026, 11, 1, 10, 0, 1, 0)
    exits.seeDue()
    expect(seen).toEqual(['a'])
    // b ended after that relist: it waits for the next one.
    now += 200
    exits.add(container('b'), () => seen.push('b'))
    now += 799
    exits.seeDue()
    expect(seen).toEqual(['a'])
    now += 1
    exits.seeDue()
    expect(seen).toEqual(['a', 'b'])
    expect(exits.size).toBe(0)
    expect(timers.size).toBe(0)
  })

  test('an exit is due at the relist after it ended, not after its output drained: one that drained past that relist is seen at once', async () => {
    const clock = new FakeClock()
    const exits = new UnseenExits(clock, {relistPeriodMs: 1_000, syncBackoffMs: 10_000, jitter: 0})
    await clock.advance(1_000 - (clock.now() % 1_000) + 900)
    const seen: string[] = []
    const endedAt = clock.now()
    await clock.advance(300)
    exits.add(container('a'), () => seen.push('a'), endedAt)
    expect(seen).toEqual(['a'])
    exits.add(container('b'), () => seen.push('b'), clock.now() - 100)
    expect(seen).toEqual(['a'])
    await clock.advance(800)
    expect(seen).toEqual(['a', 'b'])
    expect(clock.pending).toBe(0)
  })

  test('with no relist period an exit is seen at once', () => {
    const clock = new FakeClock()
    const exits = new UnseenExits(clock, {relistPeriodMs: 0, syncBackoffMs: 10_000, jitter: 0})
    let seen = false
    exits.add(container('a'), () => (seen = true))
    expect(seen).toBe(true)
    expect(exits.size).toBe(0)
  })
})
