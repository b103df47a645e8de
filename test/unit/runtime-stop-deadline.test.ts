import {describe, expect, test} from '@jest/globals'
import {StopDeadline} from '../../src/emulator/runtime/container/stop-deadline.js'
import {FakeClock, settle} from './fake-clock.js'

/** Whether the promise has settled once promise callbacks have run (the fake clock does not move meanwhile). */
async function hasSettled(p: Promise<void>): Promise<boolean> {
  let done = false
  void p.then(() => (done = true))
  await settle()
  return done
}

describe('a stop deadline: it only comes closer, and waiters wake when it passes', () => {
  test('without a deadline nobody wakes; once set, the waiter wakes when it passes, not before', async () => {
    const clock = new FakeClock()
    const d = new StopDeadline(clock)
    const waiting = d.passed()
    await clock.advance(60_000)
    expect(await hasSettled(waiting)).toBe(false)
    expect(clock.pending).toBe(0)
    d.moveTo(clock.now() + 60)
    await clock.advance(59)
    expect(await hasSettled(waiting)).toBe(false)
    await clock.advance(1)
    expect(await hasSettled(waiting)).toBe(true)
    expect(clock.pending).toBe(0)
  })

  test('a later deadline is ignored; a sooner one wakes the waiter sooner', async () => {
    const clock = new FakeClock()
    const d = new StopDeadline(clock)
    d.moveTo(clock.now() + 10_000)
    const waiting = d.passed()
    d.moveTo(clock.now() + 20_000)
    expect(d.at).toBe(clock.now() + 10_000)
    d.moveTo(clock.now() + 20)
    expect(d.at).toBe(clock.now() + 20)
    await clock.advance(20)
    expect(await hasSettled(waiting)).toBe(true)
  })

  test('a deadline already past resolves at once; reset wakes whoever waits and clears it', async () => {
    const clock = new FakeClock()
    const d = new StopDeadline(clock)
    d.moveTo(clock.now() - 1)
    expect(await hasSettled(d.passed())).toBe(true)
    const e = new StopDeadline(clock)
    e.moveTo(clock.now() + 60_000)
    const waiting = e.passed()
    e.reset()
    expect(await hasSettled(waiting)).toBe(true)
    expect(e.at).toBe(Infinity)
    expect(clock.pending).toBe(0)
  })
})
