import {describe, expect, test} from '@jest/globals'
import {RateLimiter} from '../../src/emulator/kube/rate-limiter.js'

describe('RateLimiter', () => {
  test('lets a burst through at once, then holds the rest back', async () => {
    const rl = new RateLimiter(5, 3)
    let done = 0
    const all = Array.from({length: 5}, () => rl.acquire().then(() => done++))
    await Promise.resolve()
    await Promise.resolve()
    expect(done).toBe(3)
    expect(rl.pending).toBe(2)
    await Promise.all(all)
    expect(done).toBe(5)
    expect(rl.pending).toBe(0)
  })

  test('qps 0 is unthrottled', async () => {
    const rl = new RateLimiter(0, 1)
    await Promise.all(Array.from({length: 100}, () => rl.acquire()))
    expect(rl.pending).toBe(0)
  })
})
