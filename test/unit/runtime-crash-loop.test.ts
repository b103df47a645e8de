import {describe, expect, test} from '@jest/globals'
import {CrashLoopBackoff, goDuration} from '../../src/emulator/runtime/container/crash-loop.js'

describe('CrashLoopBackOff', () => {
  test('first restart immediate, then 10 s doubling to 300 s', () => {
    const b = new CrashLoopBackoff()
    let t = 1_000_000
    expect(b.check(t, t)).toBe(0)
    const delays: number[] = []
    for (let i = 0; i < 8; i++) {
      t += 1_000 // ran for a second, then exited
      const wait = b.check(t, t)
      delays.push(wait)
      t += wait
      expect(b.check(t - wait, t)).toBe(0)
    }
    expect(delays).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000])
  })

  test('the remaining wait shrinks as time passes', () => {
    const b = new CrashLoopBackoff()
    b.check(0, 0)
    expect(b.check(100, 4_100)).toBe(6_000)
  })

  test('resets after 10 minutes of running', () => {
    const b = new CrashLoopBackoff()
    b.check(0, 0)
    expect(b.check(1_000, 1_000)).toBe(10_000)
    b.check(1_000, 11_000) // restarted at 11 s with the next delay 20 s
    expect(b.check(11_000 + 600_001, 11_000 + 600_001)).toBe(0)
    expect(b.currentMs).toBe(10_000)
  })

  test.each([
    [10_000, '10s'],
    [80_000, '1m20s'],
    [300_000, '5m0s'],
    [1_500, '1.5s'],
    [500, '500ms'],
  ])('goDuration(%d) = %s', (ms, s) => expect(goDuration(ms)).toBe(s))
})
