import {describe, expect, test} from '@jest/globals'
import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'
import {ServiceAccountTokens} from '../../src/emulator/runtime/volumes/tokens.js'

const pod: V1Pod = {metadata: {name: 'p', namespace: 'ns', uid: 'u1'}, spec: {containers: [], serviceAccountName: 'sa'}}

/** A TokenRequest endpoint whose tokens expire expirationSeconds after the clock's now. */
function fakeCore(clock: {now: number}, fail: {on: boolean}) {
  const requests: unknown[] = []
  const core = {
    createNamespacedServiceAccountToken: async (req: {body: {spec: {expirationSeconds: number}}}) => {
      requests.push(req)
      if (fail.on) throw Object.assign(new Error('unavailable'), {code: 503})
      const seconds = req.body.spec.expirationSeconds
      return {spec: {expirationSeconds: seconds}, status: {token: `t${requests.length}`, expirationTimestamp: new Date(clock.now + seconds * 1000)}}
    },
  }
  return {core: core as unknown as CoreV1Api, requests}
}

describe('the token manager', () => {
  test('one TokenRequest while fresh, a new one past 80% of the lifetime; a failed refresh keeps the valid token; forget drops it', async () => {
    const clock = {now: 1_000_000}
    const fail = {on: false}
    const {core, requests} = fakeCore(clock, fail)
    const tokens = new ServiceAccountTokens(core, {now: () => clock.now, random: () => 0})
    const projection = {expirationSeconds: 600, audience: 'a'}
    expect(await tokens.token(pod, projection)).toBe('t1')
    clock.now += 479_000
    expect(await tokens.token(pod, projection)).toBe('t1')
    expect(requests).toHaveLength(1)
    clock.now += 2_000
    expect(await tokens.token(pod, projection)).toBe('t2')
    // Another audience is another token.
    expect(await tokens.token(pod, {expirationSeconds: 600, audience: 'b'})).toBe('t3')
    clock.now += 500_000
    fail.on = true
    expect(await tokens.token(pod, projection)).toBe('t2')
    clock.now += 200_000
    await expect(tokens.token(pod, projection)).rejects.toThrow('unavailable')
    tokens.forget('u1')
    expect(tokens.size).toBe(0)
  })

  test('the jitter makes a refresh up to 10 s earlier', async () => {
    const clock = {now: 0}
    const {core, requests} = fakeCore(clock, {on: false})
    const tokens = new ServiceAccountTokens(core, {now: () => clock.now, random: () => 1})
    await tokens.token(pod, {expirationSeconds: 600})
    clock.now = 471_000
    await tokens.token(pod, {expirationSeconds: 600})
    expect(requests).toHaveLength(2)
  })
})
