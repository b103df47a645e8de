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

  test('with no relist period an exit is seen at once', () => {
    const clock = new FakeClock()
    const exits = new UnseenExits(clock, {relistPeriodMs: 0, syncBackoffMs: 10_000, jitter: 0})
    let seen = false
    exits.add(container('a'), () => (seen = true))
    expect(seen).toBe(true)
    expect(exits.size).toBe(0)
  })
})
