import {afterEach, describe, expect, test} from '@jest/globals'
import type {CoreV1Api, KubeConfig, V1Pod} from '@kubernetes/client-node'
import {unavailable} from '../../src/emulator/provider/errdefs.js'
import type {AdmissionNode} from '../../src/emulator/pods/admission.js'
import {PodController} from '../../src/emulator/pods/pod-controller.js'
import {mergeUpdates, PodWorker} from '../../src/emulator/pods/pod-worker.js'
import {shutdownGracePeriod} from '../../src/emulator/pods/pod-workers.js'
import {TestProvider} from '../support/test-provider.js'
import {FakeClock, settle} from './fake-clock.js'

/** Records status patches and deletes the way the API server would answer them, at the fake clock's time. */
class FakeCore {
  constructor(private readonly clock: FakeClock) {}
  patches: {name: string; body: {metadata: {uid: string}; status: Record<string, unknown>}; at: number}[] = []
  deletes: {name: string; gracePeriodSeconds?: number; body?: {preconditions?: {uid?: string}}; at: number}[] = []
  async patchNamespacedPodStatus(p: {name: string; namespace: string; body: {metadata: {uid: string}; status: Record<string, unknown>}}) {
    this.patches.push({name: p.name, body: p.body, at: this.clock.now()})
    return {metadata: {name: p.name, namespace: p.namespace, uid: p.body.metadata.uid}, status: p.body.status}
  }
  async deleteNamespacedPod(p: {name: string; gracePeriodSeconds?: number; body?: {preconditions?: {uid?: string}}}) {
    this.deletes.push({...p, at: this.clock.now()})
    return {}
  }
  statuses(name: string) {
    return this.patches.filter((p) => p.name === name).map((p) => p.body.status)
  }
}

const node: AdmissionNode = {name: 'n1', labels: {}, taints: [], allocatable: {cpu: '4', memory: '8Gi', pods: '110'}}

let seq = 0
function pod(name: string, opts: {env?: Record<string, string>; grace?: number; policy?: string; cpu?: string} = {}): V1Pod {
  seq++
  return {
    metadata: {name, namespace: 'ns', uid: `uid-${name}-${seq}`, resourceVersion: '1'},
    spec: {
      nodeName: 'n1',
      restartPolicy: opts.policy ?? 'Always',
      terminationGracePeriodSeconds: opts.grace ?? 30,
      containers: [{name: 'app', image: 'img', env: Object.entries(opts.env ?? {}).map(([n, value]) => ({name: n, value})), ...(opts.cpu ? {resources: {requests: {cpu: opts.cpu}}} : {})}],
    },
    status: {phase: 'Pending'},
  }
}

/**
 * Every test runs on this clock: the controller's, the status manager's and
 * the provider's timers, so waits are exact and a check that nothing more
 * happens covers every timer due in its window.
 */
let clock = new FakeClock()

function deleting(p: V1Pod, grace: number): V1Pod {
  return {
    ...structuredClone(p),
    metadata: {
      ...structuredClone(p.metadata),
      resourceVersion: String(Number(p.metadata!.resourceVersion) + 1),
      deletionTimestamp: new Date(clock.now() + grace * 1000),
      deletionGracePeriodSeconds: grace,
    },
  }
}

/**
 * Runs the node until fn holds: promise callbacks first, then the clock to
 * its next timer, at most ms of fake time; fails when that runs out, or when
 * nothing is left to run.
 */
const until = async (fn: () => boolean, what: string, ms = 5_000) => {
  const end = clock.now() + ms
  for (;;) {
    await settle()
    if (fn()) return
    if (clock.pending === 0) throw new Error(`waiting for ${what}: nothing left to run`)
    if (clock.nextAt > end) throw new Error(`timed out waiting for ${what} (${ms} ms on the clock)`)
    await clock.advance(clock.nextAt - clock.now())
  }
}

/** The clock moves on by ms, running every timer due on the way. */
const elapse = (ms: number) => clock.advance(ms)

const controllers: PodController[] = []
afterEach(async () => {
  for (const c of controllers.splice(0)) await c.stop()
})

function setup(opts: {resyncIntervalMs?: number; transitionHoldMs?: number; throttle?: () => Promise<void>} = {}) {
  clock = new FakeClock()
  const core = new FakeCore(clock)
  const provider = new TestProvider({clock})
  const events: {reason: string; type: string; message: string}[] = []
  const c = new PodController({
    core: core as unknown as CoreV1Api,
    kc: {} as KubeConfig,
    nodeName: 'n1',
    nodeIP: '10.0.0.9',
    provider,
    recorder: {record: async (_o, type, reason, message) => void events.push({type, reason, message}), forget: () => undefined},
    node: async () => node,
    statusCoalesceMs: 20,
    clock,
    resyncIntervalMs: opts.resyncIntervalMs,
    transitionHoldMs: opts.transitionHoldMs,
    statusWriter: opts.throttle ? {core: core as unknown as CoreV1Api, throttle: opts.throttle} : undefined,
  })
  controllers.push(c)
  return {core, provider, c, events}
}

describe('pod workers and the status manager with a test provider', () => {
  test('a clean start costs one status write (Running) and the provider gets a copy', async () => {
    const {core, provider, c} = setup()
    const p = pod('web', {env: {TEST_START_MS: '50'}})
    c.upsert(p)
    await until(() => core.patches.length > 0, 'a status write')
    await elapse(150)
    expect(core.patches).toHaveLength(1)
    expect(core.patches[0].body.metadata).toEqual({uid: p.metadata!.uid})
    expect(core.patches[0].body.status).toMatchObject({phase: 'Running', hostIP: '10.0.0.9', podIP: '10.0.0.9'})
    expect(core.patches[0].body).not.toHaveProperty('metadata.resourceVersion')
    // The provider mutated its copy; the config's pod is untouched.
    expect(c.config.get(p.metadata!.uid!)!.metadata!.annotations!['test.vnode.dev/mutated']).toBeUndefined()
    expect(provider.calls.map((x) => x.op)).toEqual(['create'])
  })

  test('a write that waits for its rate-limit token is built when the token comes: a start queued past the hold is still one write (Running)', async () => {
    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    let waiting = 0
    const {core, c} = setup({
      transitionHoldMs: 50,
      throttle: async () => {
        waiting++
        await gate
      },
    })
    const p = pod('queued', {env: {TEST_START_MS: '300'}})
    c.upsert(p)
    // The hold ended while the start still runs: a ContainerCreating write asks for its token...
    await until(() => waiting === 1, 'a write waiting for its token')
    // ...and gets it only once the container runs.
    await until(() => c.status.build(p.metadata!.uid!)?.phase === 'Running', 'the start to finish')
    open()
    await until(() => core.patches.length === 1, 'the write')
    await elapse(150)
    expect(core.statuses('queued')).toHaveLength(1)
    expect(core.statuses('queued')[0]).toMatchObject({phase: 'Running'})
  })

  test('graceful delete: deletePod with the grace, terminal status, then DELETE grace 0 with the UID precondition as soon as processes end', async () => {
    const {core, provider, c} = setup()
    const p = pod('web', {env: {TEST_TERM_EXIT_MS: '200'}})
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    const started = clock.now()
    c.upsert(deleting(p, 30))
    await until(() => core.deletes.length === 1, 'the final delete')
    const took = clock.now() - started
    // The container exits 200 ms after SIGTERM; the terminal status and the DELETE follow at once.
    expect(took).toBe(200)
    expect(provider.calls.find((x) => x.op === 'delete')).toMatchObject({grace: 30})
    expect(core.deletes[0]).toMatchObject({name: 'web', gracePeriodSeconds: 0, body: {preconditions: {uid: p.metadata!.uid}}})
    const last = core.statuses('web').at(-1)!
    expect(last.phase).toBe('Succeeded')
    expect(core.patches.at(-1)!.at).toBeLessThanOrEqual(core.deletes[0].at)
    // The watch then reports it gone: the status map returns to empty and the provider forgets it.
    c.delete(deleting(p, 30))
    await c.settled()
    expect(c.status.size).toBe(0)
    expect(c.workers.size).toBe(0)
    expect(provider.size).toBe(0)
  })

  test('a prompt kill is one status write: containers ending one by one during the kill are written with the terminal status', async () => {
    const {core, c} = setup()
    const p = pod('duo')
    p.spec!.containers = [
      {name: 'a', image: 'img', env: [{name: 'TEST_TERM_EXIT_MS', value: '30'}]},
      {name: 'b', image: 'img', env: [{name: 'TEST_TERM_EXIT_MS', value: '300'}]},
    ]
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    c.upsert(deleting(p, 30))
    await until(() => core.deletes.length === 1, 'the final delete')
    const statuses = core.statuses('duo')
    expect(statuses).toHaveLength(2)
    expect(statuses[1]).toMatchObject({phase: 'Succeeded'})
    expect((statuses[1].containerStatuses as {state: object}[]).map((x) => Object.keys(x.state))).toEqual([['terminated'], ['terminated']])
  })

  test('the hold during a kill is bounded: a container that ignores SIGTERM does not hide the exit of its sibling', async () => {
    const {core, c} = setup({transitionHoldMs: 200})
    const p = pod('stubborn', {grace: 3})
    p.spec!.containers = [
      {name: 'quick', image: 'img'},
      {name: 'slow', image: 'img', env: [{name: 'TEST_IGNORE_TERM', value: '1'}]},
    ]
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    const killed = clock.now()
    c.upsert(deleting(p, 3))
    await until(() => core.patches.length === 2, 'the status with the first exit', 2_000)
    // Written when the 200 ms hold runs out, not at the sibling's 3 s deadline.
    expect(clock.now() - killed).toBe(200)
    const mid = core.statuses('stubborn')[1]
    expect(mid.phase).toBe('Running')
    expect((mid.containerStatuses as {name: string; state: object}[]).map((x) => [x.name, Object.keys(x.state)[0]])).toEqual([
      ['quick', 'terminated'],
      ['slow', 'running'],
    ])
    expect(core.deletes).toHaveLength(0)
  })

  test('a second delete with a shorter grace shortens the running termination; a longer one never extends it', async () => {
    const {core, provider, c} = setup()
    const p = pod('web', {env: {TEST_IGNORE_TERM: '1'}})
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    const started = clock.now()
    c.upsert(deleting(p, 30))
    await until(() => provider.calls.some((x) => x.op === 'delete'), 'deletePod')
    c.upsert(deleting(p, 1))
    await until(() => core.deletes.length === 1, 'the final delete')
    // The second delete's 1 s grace, from when it came (the same instant here), not the first one's 30 s.
    expect(clock.now() - started).toBe(1_000)
    expect(provider.calls.filter((x) => x.op === 'delete').map((x) => x.grace)).toEqual([30, 1])
    const last = core.statuses('web').at(-1)! as {phase: string; containerStatuses: {state: {terminated: {exitCode: number}}}[]}
    expect(last.phase).toBe('Failed')
    expect(last.containerStatuses[0].state.terminated.exitCode).toBe(137)
  })

  test('a pod that never started is deleted at once, without asking the provider to kill anything', async () => {
    const {core, provider, c} = setup()
    const p = deleting(pod('early'), 30)
    c.upsert(p)
    await until(() => core.deletes.length === 1, 'the final delete', 1_000)
    expect(provider.calls).toEqual([])
  })

  test('force delete (object gone, grace 0) still kills the processes; nothing is written for a pod that is gone', async () => {
    const {core, provider, c} = setup()
    const p = pod('web', {env: {TEST_IGNORE_TERM: '1'}})
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    const gone = deleting(p, 0)
    c.delete(gone)
    await until(() => provider.calls.some((x) => x.op === 'cleanup'), 'kill and cleanup', 3_000)
    expect(provider.calls.find((x) => x.op === 'delete')).toMatchObject({grace: 1})
    expect(provider.runningContainers).toBe(0)
    expect(core.patches).toHaveLength(1)
    expect(core.deletes).toHaveLength(0)
    expect(c.status.size).toBe(0)
    expect(c.workers.size).toBe(0)
  })

  test('deletePod answering NotFound still completes the deletion; a failing one is retried', async () => {
    const {core, provider, c} = setup()
    const p = pod('web')
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    provider.failNextDelete.push(unavailable('busy'))
    provider.deleteAnswersNotFound = true
    c.upsert(deleting(p, 5))
    await until(() => core.deletes.length === 1, 'the final delete', 4_000)
    expect(provider.calls.filter((x) => x.op === 'delete').length).toBe(2)
    const last = core.statuses('web').at(-1) as {phase: string; containerStatuses: {state: {terminated: {reason: string; exitCode: number}}}[]}
    expect(last.phase).toBe('Failed')
    expect(last.containerStatuses[0].state.terminated).toMatchObject({reason: 'ContainerStatusUnknown', exitCode: 137})
  })

  test('processes that vanished from the provider: Failed, containers ContainerStatusUnknown exit 137', async () => {
    const {core, provider, c} = setup({resyncIntervalMs: 50})
    const p = pod('web')
    c.upsert(p)
    await until(() => core.patches.length === 1, 'Running')
    provider.vanish('ns', 'web')
    await until(() => core.statuses('web').at(-1)!.phase === 'Failed', 'Failed')
    const last = core.statuses('web').at(-1) as {containerStatuses: {state: {terminated: {reason: string; exitCode: number}}}[]}
    expect(last.containerStatuses[0].state.terminated).toMatchObject({reason: 'ContainerStatusUnknown', exitCode: 137})
    expect(core.deletes).toHaveLength(0)
  })

  test('a pod that completes (restartPolicy Never): its ended container is written at once with the phase held, then Succeeded once, never left', async () => {
    const {core, c} = setup()
    const p = pod('job', {policy: 'Never', env: {TEST_RUN_MS: '100'}})
    c.upsert(p)
    await until(() => core.statuses('job').at(-1)?.phase === 'Succeeded', 'Succeeded')
    await c.settled()
    const statuses = core.statuses('job')
    expect(statuses.map((s) => s.phase)).toEqual(['Running', 'Running', 'Succeeded'])
    // The sync that found the container ended writes it before the pod's sandbox goes (the kubelet's SyncPod, then
    // its terminating sync): the sandbox still ready, the pod not ready as completed, the phase held until nothing runs.
    const ended = statuses[1]
    expect((ended.containerStatuses as {state: object}[]).map((x) => Object.keys(x.state)[0])).toEqual(['terminated'])
    const cond = (s: typeof ended, type: string) => (s.conditions as {type: string; status: string; reason?: string}[]).find((x) => x.type === type)
    expect(cond(ended, 'PodReadyToStartContainers')?.status).toBe('True')
    expect(cond(ended, 'Ready')).toMatchObject({status: 'False', reason: 'PodCompleted'})
    expect(cond(statuses[2], 'PodReadyToStartContainers')?.status).toBe('False')
    c.upsert({...p, metadata: {...p.metadata, labels: {edited: 'yes'}}, status: {phase: 'Succeeded'}})
    await c.settled()
    await elapse(60)
    expect(core.statuses('job').map((s) => s.phase)).toEqual(['Running', 'Running', 'Succeeded'])
  })

  test('admission rejection: Failed with the reason, `Pod was rejected: ...`, a Warning event, and no provider call', async () => {
    const {core, provider, c, events} = setup()
    c.upsert(pod('big', {cpu: '8'}))
    await until(() => core.patches.length === 1, 'the rejection status')
    await c.settled()
    expect(core.patches[0].body.status).toMatchObject({
      phase: 'Failed',
      reason: 'OutOfcpu',
      message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 4000",
    })
    expect(events).toContainEqual({type: 'Warning', reason: 'OutOfcpu', message: "Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 4000"})
    expect(provider.calls).toEqual([])
  })

  test('a pod reusing the name of one still terminating starts only after it is done', async () => {
    const {core, provider, c} = setup()
    const old = pod('db-0', {env: {TEST_TERM_EXIT_MS: '300'}})
    c.upsert(old)
    await until(() => core.patches.length === 1, 'Running')
    c.delete(deleting(old, 0)) // force deleted: the object is gone at once
    const next = pod('db-0')
    c.upsert(next)
    await until(() => provider.calls.filter((x) => x.op === 'create').length === 2, 'the second create')
    const kill = provider.calls.find((x) => x.op === 'delete')!
    const create2 = provider.calls.filter((x) => x.op === 'create')[1]
    expect(create2.uid).toBe(next.metadata!.uid)
    // The old pod's container takes 300 ms to exit after SIGTERM.
    expect(create2.at - kill.at).toBe(300)
  })

  test('the status map returns to empty after a 50-pod create/delete round', async () => {
    const {core, provider, c} = setup()
    const pods = Array.from({length: 50}, (_, i) => pod(`p${i}`))
    for (const p of pods) c.upsert(p)
    await until(() => core.patches.length >= 50, 'all Running')
    for (const p of pods) c.upsert(deleting(p, 30))
    await until(() => core.deletes.length === 50, 'all deleted')
    for (const p of pods) c.delete(deleting(p, 30))
    await c.settled()
    expect(c.status.size).toBe(0)
    expect(c.workers.size).toBe(0)
    expect(provider.size).toBe(0)
    expect(provider.timers).toBe(0)
  })

  test('node shutdown: pods end Failed with reason Terminated and a DisruptionTarget condition, within the bounded grace', async () => {
    const {core, c} = setup()
    c.upsert(pod('web', {env: {TEST_IGNORE_TERM: '1'}}))
    await until(() => core.patches.length === 1, 'Running')
    const started = clock.now()
    let finished: boolean | undefined
    void c.shutdown(1).then((r) => (finished = r))
    await until(() => finished !== undefined, 'the shutdown to end', 2_000)
    expect(finished).toBe(true)
    // The pod ignores SIGTERM: it ends at the 1 s grace.
    expect(clock.now() - started).toBe(1_000)
    const last = core.statuses('web').at(-1) as {phase: string; reason: string; conditions: {type: string; status: string; reason: string}[]}
    expect(last).toMatchObject({phase: 'Failed', reason: 'Terminated'})
    expect(last.conditions).toContainEqual(expect.objectContaining({type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet'}))
  })
})

describe('pod worker mechanics', () => {
  test('the pending slot keeps the newest pod, never drops a kill, and keeps the shortest grace override', () => {
    const p1 = pod('a')
    const p2 = pod('a')
    const m = mergeUpdates({type: 'kill', pod: p1, gracePeriodOverride: 10}, {type: 'update', pod: p2, gracePeriodOverride: 20})
    expect(m).toMatchObject({type: 'kill', pod: p2, gracePeriodOverride: 10})
  })

  test('effective grace: deletion grace, else spec; only shrinks; at least 1 s', () => {
    const host = {
      provider: new TestProvider(),
      status: {setStarting() {}, setSandboxReady() {}, setReported() {}, writeNow() {}, reported: () => undefined, terminate: async () => {}},
      event() {},
      forget() {},
    }
    const p = pod('a', {grace: 45})
    const w = new PodWorker(host, {type: 'create', pod: deleting(p, 45)})
    w.stop()
    expect(w.effectiveGrace({type: 'update', pod: p})).toBe(45)
    expect(w.effectiveGrace({type: 'update', pod: deleting(p, 60)})).toBe(45)
    expect(w.effectiveGrace({type: 'update', pod: deleting(p, 10)})).toBe(10)
    expect(w.effectiveGrace({type: 'kill', pod: p, gracePeriodOverride: 3})).toBe(3)
    expect(w.effectiveGrace({type: 'update', pod: deleting(p, 0)})).toBe(1)
  })
})

describe('graceful node shutdown', () => {
  const withGrace = (g?: number): V1Pod => ({metadata: {name: 'p', namespace: 'd', uid: 'u'}, spec: {containers: [{name: 'c'}], terminationGracePeriodSeconds: g}})
  test("each pod gets the node's shutdown grace, or its own when that is shorter (the kubelet's shutdown manager)", () => {
    expect(shutdownGracePeriod(withGrace(5), 30)).toBe(5)
    expect(shutdownGracePeriod(withGrace(0), 30)).toBe(0)
    expect(shutdownGracePeriod(withGrace(60), 30)).toBe(30)
    expect(shutdownGracePeriod(withGrace(undefined), 30)).toBe(30)
  })
})
