import {afterEach, beforeEach, describe, expect, jest, test} from '@jest/globals'
import {podRequests} from '../../src/emulator/pod-requests.js'
import {DashboardStore, DefaultMaxNotes, NoteType, podRequest, toneOf} from '../../src/ui/dashboard/store.js'
import {NodeNotes} from '../../src/ui/node-notes.js'
import {FakeFeed, nodeView, pod} from './fixtures/fake-feed.js'

describe('dashboard store', () => {
  let feed: FakeFeed
  let store: DashboardStore
  beforeEach(() => {
    jest.useFakeTimers({now: new Date('2026-06-01T12:00:00Z')})
    feed = new FakeFeed()
    feed.snapshot = nodeView()
  })
  afterEach(() => {
    store?.dispose()
    jest.useRealTimers()
  })

  test('a burst of pod updates is coalesced: the first redraws at once, the rest in one redraw 100 ms later', () => {
    store = new DashboardStore(feed, {nodeName: 'dev-laptop'}).start()
    let told = 0
    store.subscribe(() => told++)
    const base = store.flushes
    jest.advanceTimersByTime(150)
    const p = pod('web')
    for (let i = 0; i < 200; i++) feed.emit('pod', {...p, status: {...p.status, phase: i % 2 ? 'Running' : 'Pending'}})
    expect(told).toBe(1) // the leading edge
    jest.advanceTimersByTime(99)
    expect(told).toBe(1)
    jest.advanceTimersByTime(1)
    expect(told).toBe(2) // one trailing redraw for the other 199
    expect(store.flushes - base).toBe(2)
    expect(store.getSnapshot().rows).toHaveLength(1)
    expect(store.getSnapshot().rows[0].pod.status?.phase).toBe('Running') // the last update won
  })

  test('at most about 10 redraws per second under a continuous stream of changes', () => {
    store = new DashboardStore(feed, {nodeName: 'n', tickMs: 60_000}).start()
    let told = 0
    store.subscribe(() => told++)
    for (let ms = 0; ms < 1000; ms += 5) {
      feed.emit('pod', pod(`p${ms % 7}`))
      jest.advanceTimersByTime(5)
    }
    expect(told).toBeGreaterThanOrEqual(9)
    expect(told).toBeLessThanOrEqual(11)
  })

  test('pods are keyed by UID; podRemoved removes one; rows sort by namespace/name, then by other columns', () => {
    const a = pod('b-web', {namespace: 'shop', phase: 'Running', restarts: 3, createdAgoMs: 5000})
    const b = pod('a-db', {namespace: 'shop', phase: 'Running', restarts: 0, createdAgoMs: 90_000})
    const c = pod('zz', {namespace: 'default'})
    feed.podList = [a, b]
    store = new DashboardStore(feed, {nodeName: 'n'}).start()
    feed.emit('pod', c)
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().rows.map((r) => r.name)).toEqual(['zz', 'a-db', 'b-web'])
    store.setSort('restarts', true)
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().rows.map((r) => r.name)).toEqual(['b-web', 'a-db', 'zz']) // exact reverse of ascending
    store.setSort('age')
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().rows[0].name).toBe('b-web') // the youngest
    feed.emit('podRemoved', a.metadata!.uid)
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().rows.map((r) => r.name)).not.toContain('b-web')
  })

  test('header figures: pods used (terminal ones not counted), requests against allocatable, lease age moves with the clock', () => {
    feed.podList = [pod('a', {phase: 'Running', cpu: '250m', memory: '128Mi'}), pod('b', {phase: 'Running', cpu: '1', memory: '1Gi'}), pod('done', {phase: 'Succeeded', cpu: '2', memory: '2Gi'})]
    store = new DashboardStore(feed, {nodeName: 'n'}).start()
    const m = store.getSnapshot()
    expect(m.podsUsed).toBe(2)
    expect(m.podsCapacity).toBe(110)
    expect(m.cpuRequested).toBeCloseTo(1.25)
    expect(m.memRequested).toBe(128 * 2 ** 20 + 2 ** 30)
    expect(m.cpuAllocatable).toBe(4)
    const renewed = feed.lastLeaseRenewal!.getTime()
    jest.advanceTimersByTime(5000)
    expect(store.getSnapshot().now - renewed).toBeGreaterThanOrEqual(8000)
  })

  test('the event feed is bounded and a repeated event replaces its earlier line', () => {
    store = new DashboardStore(feed, {nodeName: 'n', maxEvents: 5}).start()
    for (let i = 0; i < 20; i++) feed.emit('event', {type: 'Normal', reason: `R${i}`, message: 'm', object: {kind: 'Pod', name: 'p'}, count: 1, time: new Date()})
    feed.emit('event', {type: 'Warning', reason: 'R19', message: 'm', object: {kind: 'Pod', name: 'p'}, count: 2, time: new Date()})
    jest.advanceTimersByTime(200)
    const ev = store.getSnapshot().events
    expect(ev).toHaveLength(5)
    expect(ev.map((e) => e.reason)).toEqual(['R15', 'R16', 'R17', 'R18', 'R19'])
    expect(ev.at(-1)!.count).toBe(2)
  })

  test("the node's own lines join the event feed at their time, as notes, bounded with the events; start-up steps are bounded too", () => {
    store = new DashboardStore(feed, {nodeName: 'n', maxEvents: 3}).start()
    feed.emit('event', {type: 'Normal', reason: 'Started', message: 'm', object: {kind: 'Pod', name: 'p'}, count: 1, time: new Date()})
    store.note('allowed namespaces: every namespace')
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().events.map((e) => [e.type, e.message])).toEqual([
      ['Normal', 'm'],
      [NoteType, 'allowed namespaces: every namespace'],
    ])
    for (let i = 0; i < 5; i++) store.note(`line ${i}`)
    for (let i = 0; i < DefaultMaxNotes + 5; i++) feed.emit('step', 'relay', `reconnect ${i}`)
    jest.advanceTimersByTime(200)
    expect(store.getSnapshot().events.map((e) => e.message)).toEqual(['line 2', 'line 3', 'line 4'])
    expect(store.getSnapshot().steps).toHaveLength(DefaultMaxNotes)
    expect(store.getSnapshot().steps.at(-1)!.detail).toBe(`reconnect ${DefaultMaxNotes + 4}`)
  })

  test('usage: CPU is the rate between two samples, memory and pids summed per pod; a vanished pod loses its usage', () => {
    feed.withUsage()
    const p = pod('web', {phase: 'Running', containers: ['app', 'side']})
    const uid = p.metadata!.uid!
    feed.podList = [p]
    feed.usageList = [
      {podUID: uid, container: 'app', cpuSeconds: 10, memoryBytes: 50 * 2 ** 20, pid: 100},
      {podUID: uid, container: 'side', cpuSeconds: 1, memoryBytes: 10 * 2 ** 20, pid: 101},
    ]
    store = new DashboardStore(feed, {nodeName: 'n', usageIntervalMs: 2000}).start()
    feed.usageList = [
      {podUID: uid, container: 'app', cpuSeconds: 11, memoryBytes: 50 * 2 ** 20, pid: 100},
      {podUID: uid, container: 'side', cpuSeconds: 1.5, memoryBytes: 10 * 2 ** 20, pid: 101},
    ]
    jest.advanceTimersByTime(2000)
    jest.advanceTimersByTime(200)
    const row = store.getSnapshot().rows[0]
    expect(row.cpu).toBe('750m') // 1.5 CPU-seconds over 2 s
    expect(row.mem).toBe('60Mi')
    expect(row.pid).toBe('100,101')
    feed.usageList = []
    jest.advanceTimersByTime(2200)
    expect(store.getSnapshot().rows[0].cpu).toBe('-')
  })

  test('dispose detaches from the feed and stops every timer', () => {
    store = new DashboardStore(feed, {nodeName: 'n'}).start()
    expect(feed.listenerCount('pod')).toBe(1)
    store.dispose()
    expect(feed.listenerCount('pod')).toBe(0)
    expect(jest.getTimerCount()).toBe(0)
  })

  test('tones follow the STATUS column', () => {
    expect(toneOf('Running', '1/1')).toBe('ok')
    expect(toneOf('Running', '0/1')).toBe('pending')
    expect(toneOf('CrashLoopBackOff', '0/1')).toBe('failed')
    expect(toneOf('Init:ExitCode:3', '0/1')).toBe('failed')
    expect(toneOf('Terminating', '1/1')).toBe('terminating')
    expect(toneOf('Completed', '0/1')).toBe('completed')
    expect(toneOf('ContainerCreating', '0/1')).toBe('pending')
  })

  test('a pod request is max(app containers + sidecars, largest init) plus overhead', () => {
    const p = pod('x', {cpu: '100m'})
    p.spec!.initContainers = [{name: 'init', resources: {requests: {cpu: '500m'}}}]
    expect(podRequest(p, 'cpu')).toBeCloseTo(0.5)
    p.spec!.overhead = {cpu: '50m'}
    expect(podRequest(p, 'cpu')).toBeCloseTo(0.55)
  })

  test('the header counts requests as admission does: a limit stands in for a missing request, sidecars add to a later init', () => {
    const p = pod('x', {cpu: '100m'})
    p.spec!.containers[0].resources = {limits: {cpu: '200m', memory: '64Mi'}}
    p.spec!.initContainers = [
      {name: 'proxy', restartPolicy: 'Always', resources: {requests: {cpu: '300m'}}},
      {name: 'migrate', resources: {requests: {cpu: '400m'}}},
    ]
    const admitted = podRequests(p)
    expect(podRequest(p, 'cpu')).toBeCloseTo(admitted.cpu / 1000)
    expect(podRequest(p, 'cpu')).toBeCloseTo(0.7) // max(200m + 300m, 300m + 400m)
    expect(podRequest(p, 'memory')).toBe(64 * 2 ** 20)
  })
})

describe('node notes', () => {
  test('go to stderr, to the sink while diverted, and to stderr again once the diversion ends', () => {
    const written: string[] = []
    const notes = new NodeNotes({write: (s: string) => written.push(s)} as unknown as NodeJS.WritableStream)
    notes.write('mode: sandbox none')
    const diverted: string[] = []
    const undivert = notes.divert((l) => diverted.push(l))
    notes.write('allowed namespaces: a, b')
    undivert()
    notes.write('cluster DNS: gone')
    expect(written).toEqual(['mode: sandbox none\n', 'cluster DNS: gone\n'])
    expect(diverted).toEqual(['allowed namespaces: a, b'])
  })
})
