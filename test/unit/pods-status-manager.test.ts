import {describe, expect, test} from '@jest/globals'
import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'
import {DefaultStatusCoalesceMs, DefaultTransitionHoldMs, StatusManager} from '../../src/emulator/pods/status-manager.js'
import {DefaultStatusWriteTurnMs} from '../../src/emulator/pods/write-turns.js'
import {FakeClock, settle} from './fake-clock.js'

interface Patch {
  at: number
  name: string
  body: {status: {phase?: string; containerStatuses?: Array<{name: string; state?: object}>}}
}

/** The API's two verbs the status manager uses, recorded with the fake clock's time. */
function fakeCore(clock: FakeClock) {
  const patches: Patch[] = []
  const deletes: string[] = []
  const core = {
    patchNamespacedPodStatus: async (req: {name: string; namespace: string; body: Patch['body']}) => {
      patches.push({at: clock.now(), name: req.name, body: req.body})
      return {metadata: {name: req.name, namespace: req.namespace}}
    },
    deleteNamespacedPod: async (req: {name: string}) => {
      deletes.push(req.name)
      return {}
    },
  } as unknown as CoreV1Api
  return {core, patches, deletes}
}

function pod(name: string): V1Pod {
  return {metadata: {name, namespace: 'ns', uid: `uid-${name}`, generation: 1}, spec: {nodeName: 'n', containers: [{name: 'app', image: 'busybox'}]}, status: {phase: 'Pending'}}
}

const running = {containerStatuses: [{name: 'app', image: 'busybox', imageID: '', ready: true, started: true, restartCount: 0, state: {running: {startedAt: new Date(0)}}}]}

function manager(clock: FakeClock, core: CoreV1Api, inTransition = () => false, couldHaveRunningContainers = () => true) {
  return new StatusManager(core, {nodeIP: '10.0.0.1', clock, reconcileMs: 0, hooks: {couldHaveRunningContainers, inTransition}})
}

describe('StatusManager on a fake clock', () => {
  test('a burst of changes is one write, DefaultStatusCoalesceMs after the first', async () => {
    const clock = new FakeClock()
    const {core, patches} = fakeCore(clock)
    const sm = manager(clock, core)
    const t0 = clock.now()
    sm.track(pod('a'))
    await clock.advance(DefaultStatusCoalesceMs / 2)
    sm.setSandboxReady('uid-a', true)
    sm.setReported('uid-a', running)
    expect(patches).toHaveLength(0)
    await clock.advance(DefaultStatusCoalesceMs / 2 - 1)
    expect(patches).toHaveLength(0)
    await clock.advance(1)
    expect(patches.map((p) => [p.at - t0, p.name, p.body.status.phase])).toEqual([[DefaultStatusCoalesceMs, 'a', 'Running']])
    await clock.advance(60_000)
    expect(patches).toHaveLength(1)
    sm.stop()
  })

  test('while the pod is in transition its writes wait, up to DefaultTransitionHoldMs, and go at once when the start is over', async () => {
    const clock = new FakeClock()
    const {core, patches} = fakeCore(clock)
    let transition = true
    const sm = manager(clock, core, () => transition)
    const t0 = clock.now()
    sm.track(pod('a'))
    sm.track(pod('b'))
    await clock.advance(DefaultTransitionHoldMs - 1)
    expect(patches).toHaveLength(0)
    await clock.advance(1)
    expect(patches.map((p) => [p.at - t0, p.name])).toEqual([
      [DefaultTransitionHoldMs, 'a'],
      [DefaultTransitionHoldMs, 'b'],
    ])
    sm.setReported('uid-a', running)
    await clock.advance(500)
    expect(patches).toHaveLength(2)
    transition = false
    sm.setStarting('uid-a', false)
    await clock.advance(0)
    await settle()
    expect(patches.map((p) => [p.at - t0, p.name])).toEqual([
      [DefaultTransitionHoldMs, 'a'],
      [DefaultTransitionHoldMs, 'b'],
      [DefaultTransitionHoldMs + 500, 'a'],
    ])
    sm.stop()
  })

  test('writeNow writes the status as it stands at once, whatever the transition hold; what follows is held again', async () => {
    const clock = new FakeClock()
    const {core, patches} = fakeCore(clock)
    const sm = manager(clock, core, () => true)
    const t0 = clock.now()
    sm.track(pod('a'))
    sm.setSandboxReady('uid-a', true)
    sm.setReported('uid-a', running)
    await clock.advance(DefaultTransitionHoldMs)
    expect(patches).toHaveLength(1)
    const ended = {containerStatuses: [{...running.containerStatuses[0], ready: false, state: {terminated: {exitCode: 0, reason: 'Completed'}}}]}
    sm.setReported('uid-a', ended)
    await clock.advance(DefaultStatusCoalesceMs)
    expect(patches).toHaveLength(1)
    sm.writeNow('uid-a')
    // The change that comes right after is not in that write: it waits for the hold.
    sm.setSandboxReady('uid-a', false)
    await settle()
    expect(patches.map((p) => [p.at - t0, p.body.status.containerStatuses?.[0].state])).toEqual([
      [DefaultTransitionHoldMs, {running: {startedAt: new Date(0).toISOString()}}],
      [DefaultTransitionHoldMs + DefaultStatusCoalesceMs, {terminated: {exitCode: 0, reason: 'Completed'}}],
    ])
    await clock.advance(DefaultTransitionHoldMs - 1)
    expect(patches).toHaveLength(2)
    await clock.advance(1)
    expect(patches).toHaveLength(3)
    sm.stop()
  })

  test('writeNow writes nothing for a pod deleted with no grace: the API removes it at once', async () => {
    const clock = new FakeClock()
    const {core, patches} = fakeCore(clock)
    const sm = manager(clock, core, () => true)
    const p = pod('a')
    sm.track(p)
    sm.setReported('uid-a', running)
    await clock.advance(DefaultTransitionHoldMs)
    expect(patches).toHaveLength(1)
    sm.track({...p, metadata: {...p.metadata, deletionTimestamp: new Date(clock.now()), deletionGracePeriodSeconds: 0}})
    // A change is pending (the kill's start sees the container's status change): still nothing is written.
    sm.setReported('uid-a', {containerStatuses: [{...running.containerStatuses[0], ready: false}]})
    sm.writeNow('uid-a')
    await settle()
    expect(patches).toHaveLength(1)
    // As before, the API's own removal comes first and ends the entry, with its pending write.
    sm.remove('uid-a')
    await clock.advance(DefaultTransitionHoldMs)
    expect(patches).toHaveLength(1)
    expect(clock.pending).toBe(0)
    sm.stop()
  })

  test('a deleted pod whose container never ran: first its sandbox gone with the container still waiting (Pending), then TerminatePod (lost, Failed), then the DELETE', async () => {
    const clock = new FakeClock()
    const {core, patches, deletes} = fakeCore(clock)
    let worker: 'sync' | 'terminated' = 'sync'
    const sm = manager(
      clock,
      core,
      () => false,
      () => worker === 'sync',
    )
    const p = pod('a')
    sm.track(p)
    sm.setSandboxReady('uid-a', true)
    const waiting = {containerStatuses: [{name: 'app', image: 'busybox', imageID: '', ready: false, restartCount: 0, started: false, state: {waiting: {reason: 'ContainerCreating'}}}]}
    sm.setReported('uid-a', waiting)
    await clock.advance(DefaultStatusCoalesceMs)
    sm.track({...p, metadata: {...p.metadata, deletionTimestamp: new Date(clock.now()), deletionGracePeriodSeconds: 30}})
    worker = 'terminated'
    sm.setSandboxReady('uid-a', false)
    await sm.terminate('uid-a')
    const states = patches.map((x) => [x.body.status.phase, Object.keys(x.body.status.containerStatuses?.[0].state ?? {})[0]])
    expect(states).toEqual([
      ['Pending', 'waiting'],
      ['Pending', 'waiting'],
      ['Failed', 'terminated'],
    ])
    const sandbox = (x: Patch) => (x.body.status as {conditions?: {type: string; status: string}[]}).conditions?.find((c) => c.type === 'PodReadyToStartContainers')?.status
    expect(patches.map(sandbox)).toEqual(['True', 'False', 'False'])
    expect(patches[2].body.status.containerStatuses?.[0].state).toMatchObject({terminated: {exitCode: 137, reason: 'ContainerStatusUnknown'}})
    expect(deletes).toEqual(['a'])
    sm.stop()
  })

  test('a terminated pod being deleted gets its terminal status, then the final DELETE; stop() leaves no timer', async () => {
    const clock = new FakeClock()
    const {core, patches, deletes} = fakeCore(clock)
    // The worker is done with the pod: no process of it is left.
    const sm = manager(
      clock,
      core,
      () => false,
      () => false,
    )
    const p = {...pod('a'), spec: {...pod('a').spec!, restartPolicy: 'Never'}}
    sm.track(p)
    await clock.advance(DefaultStatusCoalesceMs)
    sm.track({...p, metadata: {...p.metadata, deletionTimestamp: new Date(clock.now()), deletionGracePeriodSeconds: 30}})
    sm.setReported('uid-a', {containerStatuses: [{...running.containerStatuses[0], ready: false, state: {terminated: {exitCode: 0, reason: 'Completed'}}}]})
    await sm.terminate('uid-a')
    expect(patches.at(-1)!.body.status.phase).toBe('Succeeded')
    expect(deletes).toEqual(['a'])
    sm.track(pod('b'))
    expect(clock.pending).toBeGreaterThan(0)
    sm.stop()
    expect(clock.pending).toBe(0)
  })
})

describe('StatusManager: writes in flight', () => {
  /** A core whose PATCHes stay in flight until the test lets them go. */
  function slowCore() {
    const patches: Array<{name: string; phase?: string; generation?: number}> = []
    const deletes: string[] = []
    const gates: Array<() => void> = []
    let inFlight = 0
    let maxInFlight = 0
    const core = {
      patchNamespacedPodStatus: async (req: {name: string; namespace: string; body: Patch['body'] & {status: {observedGeneration?: number}}}) => {
        inFlight++
        maxInFlight = Math.max(maxInFlight, inFlight)
        patches.push({name: req.name, phase: req.body.status.phase, generation: req.body.status.observedGeneration})
        await new Promise<void>((r) => gates.push(r))
        inFlight--
        return {metadata: {name: req.name, namespace: req.namespace}}
      },
      deleteNamespacedPod: async (req: {name: string}) => {
        deletes.push(req.name)
        return {}
      },
    } as unknown as CoreV1Api
    return {core, patches, deletes, gates, maxInFlight: () => maxInFlight}
  }

  test('at most writesInFlight at once; a pod that waited for its turn writes what it is by then: a graceful delete and the prompt kill after it are one write', async () => {
    const clock = new FakeClock()
    const {core, patches, deletes, gates, maxInFlight} = slowCore()
    let done = false
    const sm = new StatusManager(core, {
      nodeIP: '10.0.0.1',
      clock,
      reconcileMs: 0,
      writesInFlight: 2,
      hooks: {couldHaveRunningContainers: () => !done, inTransition: () => false},
    })
    const pods = ['a', 'b', 'c', 'd'].map(pod)
    for (const p of pods) sm.track(p)
    await clock.advance(DefaultStatusCoalesceMs)
    await settle()
    // Two writes in flight, two waiting.
    expect(patches.map((p) => p.name)).toEqual(['a', 'b'])
    // d is deleted (a new generation) and its kill ends before its turn comes.
    const deleted = {...pods[3], metadata: {...pods[3].metadata, generation: 2, deletionTimestamp: new Date(clock.now()), deletionGracePeriodSeconds: 30}}
    sm.track(deleted)
    done = true
    sm.setReported('uid-d', {containerStatuses: [{...running.containerStatuses[0], ready: false, state: {terminated: {exitCode: 143, reason: 'Error'}}}]})
    const terminating = sm.terminate('uid-d')
    while (patches.length < 4 || gates.length > 0) {
      gates.shift()?.()
      await settle()
    }
    await terminating
    expect(maxInFlight()).toBe(2)
    // d's first write already carries the delete's generation and its terminal phase: one write, then the DELETE.
    expect(patches.filter((p) => p.name === 'd')).toEqual([{name: 'd', phase: 'Failed', generation: 2}])
    expect(deletes).toEqual(['d'])
    sm.stop()
  })

  test('a write that does not answer gives its turn to the next after DefaultStatusWriteTurnMs', async () => {
    const clock = new FakeClock()
    const {core, patches, gates} = slowCore()
    const sm = new StatusManager(core, {nodeIP: '10.0.0.1', clock, reconcileMs: 0, writesInFlight: 1, hooks: {couldHaveRunningContainers: () => true, inTransition: () => false}})
    sm.track(pod('a'))
    sm.track(pod('b'))
    await clock.advance(DefaultStatusCoalesceMs)
    await settle()
    expect(patches.map((p) => p.name)).toEqual(['a'])
    await clock.advance(DefaultStatusWriteTurnMs - 1)
    await settle()
    expect(patches.map((p) => p.name)).toEqual(['a'])
    await clock.advance(1)
    await settle()
    expect(patches.map((p) => p.name)).toEqual(['a', 'b'])
    for (const g of gates.splice(0)) g()
    await settle()
    sm.stop()
    expect(clock.pending).toBe(0)
  })

  test('stop() lets the writes waiting for their turn go without writing', async () => {
    const clock = new FakeClock()
    const {core, patches, gates} = slowCore()
    const sm = new StatusManager(core, {nodeIP: '10.0.0.1', clock, reconcileMs: 0, writesInFlight: 1, hooks: {couldHaveRunningContainers: () => true, inTransition: () => false}})
    sm.track(pod('a'))
    sm.track(pod('b'))
    await clock.advance(DefaultStatusCoalesceMs)
    await settle()
    expect(patches.map((p) => p.name)).toEqual(['a'])
    sm.stop()
    gates.shift()!()
    await settle()
    expect(patches.map((p) => p.name)).toEqual(['a'])
    expect(clock.pending).toBe(0)
  })
})
