import {describe, expect, test} from '@jest/globals'
import {DefaultRefillHoldMs, RefillHolds} from '../../src/common/refill-holds.js'

describe("RefillHolds: the node's pod starts and stops under way, one signal for its background work", () => {
  test('every listener hears each hold begin and end once; a hold ended twice is heard once', () => {
    let now = 1_000
    const holds = new RefillHolds(() => now)
    const heard: string[] = []
    holds.listen({began: () => heard.push('a began'), ended: () => heard.push('a ended')})
    const stopB = holds.listen({ended: () => heard.push(`b ended, ${holds.size} left`)})
    const first = holds.add()
    const second = holds.add()
    expect(holds.size).toBe(2)
    first()
    first()
    stopB()
    second()
    expect(heard).toEqual(['a began', 'a began', 'a ended', 'b ended, 1 left', 'a ended'])
    expect(holds.size).toBe(0)
    now += 1
    expect(holds.releaseAt()).toBeUndefined()
  })

  test('holds stop holding DefaultRefillHoldMs after they began, the earliest first', () => {
    let now = 0
    const holds = new RefillHolds(() => now)
    holds.add()
    now = 3_000
    holds.add()
    expect(holds.releaseAt()).toBe(DefaultRefillHoldMs)
    now = DefaultRefillHoldMs
    expect(holds.releaseAt()).toBe(3_000 + DefaultRefillHoldMs)
    now = 3_000 + DefaultRefillHoldMs
    expect(holds.releaseAt()).toBeUndefined()
    // Never ended: still counted, no longer holding.
    expect(holds.size).toBe(2)
  })
})
