import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {ConfigSeenAnnotation, ConfigSourceAnnotation, PodConfig} from '../../src/emulator/pods/config.js'

function pod(uid: string, extra: Partial<V1Pod> = {}): V1Pod {
  return {
    metadata: {name: `p-${uid}`, namespace: 'ns', uid, resourceVersion: '1', labels: {app: 'a'}, ...extra.metadata},
    spec: {containers: [{name: 'c', image: 'i'}], ...extra.spec},
    status: {phase: 'Pending', ...extra.status},
  }
}

const kinds = (ops: {op: string; pods: V1Pod[]}[]) => ops.map((o) => [o.op, o.pods.map((p) => p.metadata!.uid)])

describe('pod config: incremental ops with the kubelet update rule', () => {
  test('a new pod is an ADD carrying the local config annotations; the seen time is kept', () => {
    const c = new PodConfig(() => new Date('2030-01-01T00:00:00Z'))
    const [add] = c.upsertOne(pod('a'))
    expect(add.op).toBe('ADD')
    expect(add.pods[0].metadata!.annotations).toEqual({[ConfigSourceAnnotation]: 'api', [ConfigSeenAnnotation]: '2030-01-01T00:00:00.000Z'})
    const [upd] = c.upsertOne(pod('a', {metadata: {labels: {app: 'b'}}}))
    expect(upd.op).toBe('UPDATE')
    expect(upd.pods[0].metadata!.annotations![ConfigSeenAnnotation]).toBe('2030-01-01T00:00:00.000Z')
  })

  test('what counts as an update: spec, labels, annotations other than config.*, deletion fields', () => {
    const c = new PodConfig()
    c.upsertOne(pod('a'))
    expect(kinds(c.upsertOne(pod('a', {metadata: {resourceVersion: '2'}})))).toEqual([])
    expect(kinds(c.upsertOne(pod('a', {metadata: {annotations: {[ConfigSourceAnnotation]: 'file'}}})))).toEqual([])
    expect(kinds(c.upsertOne(pod('a', {metadata: {annotations: {'team.example/owner': 'x'}}})))).toEqual([['UPDATE', ['a']]])
    expect(kinds(c.upsertOne(pod('a', {metadata: {annotations: {'team.example/owner': 'x'}}, spec: {containers: [{name: 'c', image: 'j'}]}})))).toEqual([['UPDATE', ['a']]])
    // A status-only change is a RECONCILE.
    expect(kinds(c.upsertOne(pod('a', {metadata: {annotations: {'team.example/owner': 'x'}}, spec: {containers: [{name: 'c', image: 'j'}]}, status: {phase: 'Running'}})))).toEqual([
      ['RECONCILE', ['a']],
    ])
    // A deletionTimestamp makes it a DELETE, and so does a shorter deletion grace.
    const deleting = (g: number) =>
      pod('a', {
        metadata: {annotations: {'team.example/owner': 'x'}, deletionTimestamp: new Date(1e12), deletionGracePeriodSeconds: g},
        spec: {containers: [{name: 'c', image: 'j'}]},
        status: {phase: 'Running'},
      })
    expect(kinds(c.upsertOne(deleting(30)))).toEqual([['DELETE', ['a']]])
    expect(kinds(c.upsertOne(deleting(5)))).toEqual([['DELETE', ['a']]])
  })

  test('a listing removes what is missing and emits in order REMOVE, ADD, UPDATE', () => {
    const c = new PodConfig()
    c.set([pod('a'), pod('b')])
    const ops = c.set([pod('b', {metadata: {labels: {x: 'y'}}}), pod('c')])
    expect(kinds(ops)).toEqual([
      ['REMOVE', ['a']],
      ['ADD', ['c']],
      ['UPDATE', ['b']],
    ])
    expect(c.size).toBe(2)
  })

  test('a watch DELETED is a REMOVE carrying the final object; unknown pods are ignored', () => {
    const c = new PodConfig()
    c.upsertOne(pod('a'))
    const [rm] = c.remove(pod('a', {metadata: {deletionGracePeriodSeconds: 0}}))
    expect(rm.op).toBe('REMOVE')
    expect(rm.pods[0].metadata!.deletionGracePeriodSeconds).toBe(0)
    expect(c.remove(pod('a'))).toEqual([])
    expect(c.size).toBe(0)
  })

  test('pods handed out are copies', () => {
    const c = new PodConfig()
    const p = pod('a')
    const [add] = c.upsertOne(p)
    add.pods[0].metadata!.labels!.app = 'mutated'
    expect(p.metadata!.labels!.app).toBe('a')
  })
})
