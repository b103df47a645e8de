import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {relistChanges} from '../../src/cli/pods-service.js'

const pod = (name: string, uid: string, rv: string, extra: Partial<NonNullable<V1Pod['metadata']>> = {}): V1Pod => ({
  metadata: {name, namespace: 'ns', uid, resourceVersion: rv, ...extra},
  spec: {nodeName: 'n1', containers: []},
})

describe('relistChanges (pods -w after 410 Gone)', () => {
  const now = new Date('2026-01-02T03:04:05Z')

  test('unchanged pods are left out; new ones are ADDED, changed ones MODIFIED; gone ones come first, as deletions', () => {
    const known = new Map([
      ['u1', pod('steady', 'u1', '10')],
      ['u2', pod('changed', 'u2', '11')],
      ['u3', pod('gone', 'u3', '12')],
    ])
    const listed = [pod('born', 'u4', '30'), pod('changed', 'u2', '25'), pod('steady', 'u1', '10')]
    const changes = relistChanges(known, listed, now)
    expect(changes.map((c) => [c.type, c.pod.metadata?.name, c.pod.metadata?.resourceVersion])).toEqual([
      ['DELETED', 'gone', '12'],
      ['ADDED', 'born', '30'],
      ['MODIFIED', 'changed', '25'],
    ])
  })

  test('a pod gone in the gap is reported as its last known state with a deletion time, so it reads Terminating', () => {
    const last = pod('gone', 'u3', '12')
    const [change] = relistChanges(new Map([['u3', last]]), [], now)
    expect(change.type).toBe('DELETED')
    expect(change.pod.metadata?.deletionTimestamp).toEqual(now)
    expect(last.metadata?.deletionTimestamp).toBeUndefined()
    const terminating = pod('going', 'u5', '13', {deletionTimestamp: new Date('2026-01-01T00:00:00Z')})
    expect(relistChanges(new Map([['u5', terminating]]), [], now)[0].pod).toBe(terminating)
  })

  test('a pod deleted and created again under the same name is a deletion and an addition (UIDs differ)', () => {
    const changes = relistChanges(new Map([['old', pod('web', 'old', '5')]]), [pod('web', 'new', '9')], now)
    expect(changes.map((c) => [c.type, c.pod.metadata?.uid])).toEqual([
      ['DELETED', 'old'],
      ['ADDED', 'new'],
    ])
  })
})
