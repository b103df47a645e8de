import {describe, expect, test} from '@jest/globals'
import {StopDeadline} from '../../src/emulator/runtime/stop-deadline.js'

const settledWithin = async (p: Promise<void>, ms: number) => Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))])

describe('a stop deadline: it only comes closer, and waiters wake when it passes', () => {
  test('without a deadline nobody wakes; once set, the waiter wakes when it passes', async () => {
    const d = new StopDeadline()
    const waiting = d.passed()
    expect(await settledWithin(waiting, 30)).toBe(false)
    const start = Date.now()
    d.moveTo(Date.now() + 60)
    expect(await settledWithin(waiting, 1000)).toBe(true)
    expect(Date.now() - start).toBeGreaterThanOrEqual(55)
  })

  test('a later deadline is ignored; a sooner one wakes the waiter sooner', async () => {
    const d = new StopDeadline()
    d.moveTo(Date.now() + 10_000)
    const waiting = d.passed()
    d.moveTo(Date.now() + 20_000)
    expect(d.at).toBeLessThan(Date.now() + 10_001)
    d.moveTo(Date.now() + 20)
    expect(await settledWithin(waiting, 1000)).toBe(true)
  })

  test('a deadline already past resolves at once; reset wakes whoever waits and clears it', async () => {
    const d = new StopDeadline()
    d.moveTo(Date.now() - 1)
    expect(await settledWithin(d.passed(), 50)).toBe(true)
    const e = new StopDeadline()
    e.moveTo(Date.now() + 60_000)
    const waiting = e.passed()
    e.reset()
    expect(await settledWithin(waiting, 50)).toBe(true)
    expect(e.at).toBe(Infinity)
  })
})
