import {describe, expect, test} from '@jest/globals'
import {InFlightLimit} from '../../src/common/in-flight-limit.js'

const tick = () => new Promise((r) => setImmediate(r))

describe('InFlightLimit', () => {
  test('holds at most limit slots; the waiters get freed slots in arrival order', async () => {
    const limit = new InFlightLimit(2)
    const a = limit.tryAcquire()!
    const b = await limit.acquire()
    expect(limit.inFlight).toBe(2)
    expect(limit.tryAcquire()).toBeUndefined()
    const order: string[] = []
    const c = limit.acquire().then((r) => (order.push('c'), r))
    const d = limit.acquire().then((r) => (order.push('d'), r))
    await tick()
    expect(order).toEqual([])
    expect(limit.waiting).toBe(2)
    b()
    // A second release of the same slot frees nothing more.
    b()
    await tick()
    expect(order).toEqual(['c'])
    expect(limit.inFlight).toBe(2)
    a()
    await tick()
    expect(order).toEqual(['c', 'd'])
    // A newcomer does not jump the queue while others wait.
    ;(await c)()
    expect(limit.inFlight).toBe(1)
    expect(limit.tryAcquire()).toBeDefined()
    ;(await d)()
  })

  test('close() lets every waiter through and frees nothing twice; limit 0 is no limit', async () => {
    const limit = new InFlightLimit(1)
    const held = limit.tryAcquire()!
    const waiting = [limit.acquire(), limit.acquire()]
    limit.close()
    const releases = await Promise.all(waiting)
    for (const r of releases) r()
    held()
    expect(limit.inFlight).toBe(0)
    expect(limit.waiting).toBe(0)
    const none = new InFlightLimit(0)
    for (let i = 0; i < 5; i++) expect(none.tryAcquire()).toBeDefined()
    expect(none.inFlight).toBe(0)
  })
})
