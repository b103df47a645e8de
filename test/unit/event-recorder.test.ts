import {describe, expect, test} from '@jest/globals'
import type {CoreV1Api, CoreV1Event} from '@kubernetes/client-node'
import {DefaultEventWritesInFlight, EventRecorder} from '../../src/emulator/kube/events.js'

/** An API whose event creates answer after a delay chosen per reason, so a later write could overtake an earlier one. */
function fakeCore(delays: Record<string, number>) {
  const created: CoreV1Event[] = []
  const patched: string[] = []
  const core = {
    createNamespacedEvent: async ({body}: {body: CoreV1Event}) => {
      await new Promise((r) => setTimeout(r, delays[body.reason ?? ''] ?? 0))
      created.push(body)
      return body
    },
    patchNamespacedEvent: async ({name}: {name: string}) => {
      patched.push(name)
      return {}
    },
  } as unknown as CoreV1Api
  return {core, created, patched}
}

const pod = {kind: 'Pod', namespace: 'ns', name: 'p', uid: 'u1'}
const container = (name: string) => ({...pod, fieldPath: `spec.containers{${name}}`})

describe('event recorder', () => {
  test('events about one pod reach the API server in the order they happened, even when an earlier write is slower', async () => {
    const {core, created} = fakeCore({Pulled: 60, Created: 0, Started: 20})
    const r = new EventRecorder(core, 'node-a')
    void r.record(container('c'), 'Normal', 'Pulled', 'Container image "img" already present on machine')
    void r.record(container('c'), 'Normal', 'Created', 'Created container: c')
    void r.record(container('c'), 'Normal', 'Started', 'Started container c')
    await r.flush()
    expect(created.map((e) => e.reason)).toEqual(['Pulled', 'Created', 'Started'])
  })

  test('events about different pods do not wait for each other', async () => {
    const {core, created} = fakeCore({Slow: 80, Fast: 0})
    const r = new EventRecorder(core, 'node-a')
    void r.record(pod, 'Normal', 'Slow', 'm')
    void r.record({...pod, name: 'q', uid: 'u2'}, 'Normal', 'Fast', 'm')
    await r.flush()
    expect(created.map((e) => e.reason)).toEqual(['Fast', 'Slow'])
  })

  test('a burst of events about many pods has at most DefaultEventWritesInFlight writes in flight; each is timed when it happened', async () => {
    let inFlight = 0
    let most = 0
    const created: CoreV1Event[] = []
    const sentAt: number[] = []
    const doneAt: number[] = []
    const core = {
      createNamespacedEvent: async ({body}: {body: CoreV1Event}) => {
        most = Math.max(most, ++inFlight)
        sentAt.push(Date.now())
        await new Promise((r) => setTimeout(r, 20))
        doneAt.push(Date.now())
        inFlight--
        created.push(body)
        return body
      },
    } as unknown as CoreV1Api
    const r = new EventRecorder(core, 'node-a')
    const seen: Date[] = []
    r.onEvent((e) => seen.push(e.time))
    const n = DefaultEventWritesInFlight * 2 + 1
    for (let i = 0; i < n; i++) void r.record({...pod, name: `p${i}`, uid: `u${i}`}, 'Normal', 'Started', 'Started container c')
    // The listeners (the dashboard) hear of every event at once, not when its write gets a slot.
    await new Promise((r) => setImmediate(r))
    expect(seen).toHaveLength(n)
    await r.flush()
    expect(created).toHaveLength(n)
    expect(most).toBe(DefaultEventWritesInFlight)
    // The last ones were sent only once earlier writes were done, and are still stamped before any write was done.
    const firstDone = Math.min(...doneAt)
    expect(Math.max(...sentAt)).toBeGreaterThanOrEqual(firstDone)
    for (const e of created) expect(new Date(e.firstTimestamp!).getTime()).toBeLessThanOrEqual(firstDone)
  })

  test('the same reason and message for two containers are two events; a repeat for one container bumps its count', async () => {
    const {core, created, patched} = fakeCore({})
    const r = new EventRecorder(core, 'node-a')
    const msg = 'Container image "img" already present on machine'
    await r.record(container('a'), 'Normal', 'Pulled', msg)
    await r.record(container('b'), 'Normal', 'Pulled', msg)
    await r.record(container('a'), 'Normal', 'Pulled', msg)
    expect(created.map((e) => e.involvedObject.fieldPath)).toEqual(['spec.containers{a}', 'spec.containers{b}'])
    expect(patched).toHaveLength(1)
    expect(patched[0]).toBe(created[0].metadata!.name)
  })

  test('nothing is kept per object once its writes are done', async () => {
    const {core} = fakeCore({})
    const r = new EventRecorder(core, 'node-a')
    for (let i = 0; i < 20; i++) void r.record({...pod, uid: `u${i}`}, 'Normal', 'R', 'm')
    await r.flush()
    expect((r as unknown as {tails: Map<string, unknown>}).tails.size).toBe(0)
  })
})
