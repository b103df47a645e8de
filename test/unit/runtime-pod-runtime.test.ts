import {afterEach, describe, expect, test} from '@jest/globals'
import type {CoreV1Api, V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import type {EventRecorder} from '../../src/emulator/kube/events.js'
import type {ReferencedObjects} from '../../src/emulator/kube/object-manager.js'
import type {ProviderContext} from '../../src/emulator/provider/handler.js'
import {ImageMap} from '../../src/emulator/runtime/images/image-map.js'
import {MinimumKillGraceMs} from '../../src/emulator/runtime/container/stop.js'
import {PodRuntime} from '../../src/emulator/runtime/pod/pod-runtime.js'
import {RestartAnnotation} from '../../src/common/labels.js'
import {tempDir} from './temp-dirs.js'

interface Event {
  reason: string
  message: string
  fieldPath?: string
}

/** A PodRuntime of bare host processes (no sandbox, no cgroups, no network), without an API server: what it records and reports is kept. */
function runtime(pod: V1Pod, crashLoop = {initialMs: 300, maxMs: 600, resetMs: 60_000}, sync = {relistPeriodMs: 50, syncBackoffMs: 100, jitter: 0}) {
  const stateDir = tempDir('vnode-pod-runtime-')
  const events: Event[] = []
  const reports: V1Pod[] = []
  const recorder = {
    record: async (ref: {fieldPath?: string}, _type: string, reason: string, message: string) => void events.push({reason, message, fieldPath: ref.fieldPath}),
    forget: () => undefined,
  } as unknown as EventRecorder
  const objects = {register: () => undefined, unregister: () => undefined} as unknown as ReferencedObjects
  const ctx: ProviderContext = {nodeName: 'n', nodeIP: '127.0.0.1', stateDir, core: {} as CoreV1Api, objects, services: {list: async () => []}, recorder, knownPod: () => undefined}
  const rt = new PodRuntime(pod, {
    ctx,
    images: new ImageMap(),
    node: {nodeName: 'n', nodeIP: '127.0.0.1', cpuCores: 2, memoryBytes: 2 ** 30, ephemeralStorageBytes: 2 ** 34},
    rotation: {maxBytes: 1 << 20, maxFiles: 2},
    // Short back-offs and a quick relist: the rules are the kubelet's, the durations a test's.
    crashLoop,
    mountRetry: {initialMs: 100, maxMs: 200},
    sync,
    sandbox: join(stateDir, 'pods', pod.metadata!.uid!),
    tokens: {token: async () => 'token', forget: () => undefined},
    path: process.env.PATH,
    sandboxMode: 'none',
    dns: {clusterDNS: [], clusterDomain: 'cluster.local'},
    notify: (p) => void reports.push(p),
  })
  return {rt, events, reports, stateDir}
}

function pod(name: string, script: string, over: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return {
    metadata: {name, namespace: 'ns', uid: `uid-${name}`},
    spec: {terminationGracePeriodSeconds: 5, containers: [{name: 'app', image: 'busybox', command: ['/bin/sh', '-c', script]}], ...over},
    status: {},
  }
}

/**
 * A shell loop that handles SIGTERM as `handler` says ('exit 0', or '' to ignore it) and makes `mark` once its trap
 * is set: the relist may see the start a few milliseconds after the spawn, before the shell has read its trap, and a
 * SIGTERM then finds the shell's default (143).
 */
function trapLoop(handler: 'exit 0' | '', mark: string): string {
  return `trap "${handler}" TERM; : > ${mark}; while :; do sleep 0.05; done`
}

async function until<T>(what: string, f: () => T | undefined, ms = 8_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const app = (rt: PodRuntime): V1ContainerStatus => rt.status().containerStatuses!.find((c) => c.name === 'app')!
const open: PodRuntime[] = []
afterEach(async () => {
  for (const rt of open.splice(0)) await rt.close()
})

describe('PodRuntime without an API server: bare processes', () => {
  test('a start is Created and Started and reported running once seen; terminate sends SIGTERM, records Killing, and releases the sandbox', async () => {
    const mark = join(tempDir('vnode-trap-'), 'set')
    const {rt, events, reports, stateDir} = runtime(pod('steady', trapLoop('exit 0', mark)))
    open.push(rt)
    await rt.start()
    await until('its trap is set', () => existsSync(mark))
    expect(app(rt).state?.running).toBeDefined()
    expect(reports.at(-1)!.status!.containerStatuses![0].state!.running).toBeDefined()
    expect(events.map((e) => e.reason)).toEqual(['Pulled', 'Created', 'Started'])
    expect(events[1]).toEqual({reason: 'Created', message: 'Created container: app', fieldPath: 'spec.containers{app}'})
    await rt.terminate(5)
    expect(rt.quiet).toBe(true)
    expect(app(rt).state?.terminated).toMatchObject({exitCode: 0, reason: 'Completed'})
    expect(events.filter((e) => e.reason === 'Killing').map((e) => e.message)).toEqual(['Stopping container app'])
    expect(existsSync(join(stateDir, 'pods', 'uid-steady', 'volumes'))).toBe(false)
    await rt.cleanup()
    expect(existsSync(join(stateDir, 'pods', 'uid-steady'))).toBe(false)
  })

  test('a container that keeps failing restarts at once, then waits in CrashLoopBackOff, its back-off doubling', async () => {
    const {rt, events} = runtime(pod('crash', 'exit 3'))
    open.push(rt)
    await rt.start()
    const waiting = await until('CrashLoopBackOff', () => (app(rt).state?.waiting?.reason === 'CrashLoopBackOff' ? app(rt) : undefined))
    expect(waiting.lastState?.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    expect(waiting.restartCount).toBeGreaterThanOrEqual(1)
    expect(waiting.state!.waiting!.message).toMatch(/^back-off (300ms|600ms) restarting failed container=app pod=crash_ns\(uid-crash\)$/)
    await until('the back-off at its cap', () => /^back-off 600ms/.test(app(rt).state?.waiting?.message ?? ''))
    expect(events.some((e) => e.reason === 'BackOff' && e.message === 'Back-off restarting failed container app in pod crash_ns(uid-crash)')).toBe(true)
    expect(app(rt).restartCount).toBeGreaterThanOrEqual(2)
  })

  test("a crash found in back-off shows terminated, the instance before its lastState, until the next sync shows CrashLoopBackOff (the kubelet's reason cache)", async () => {
    // A back-off of 5 s and a sync back-off of 1 s: the sync after the one that found the back-off comes a second later.
    const {rt, reports} = runtime(pod('cache', 'exit 3'), {initialMs: 5_000, maxMs: 5_000, resetMs: 60_000}, {relistPeriodMs: 50, syncBackoffMs: 1_000, jitter: 0})
    open.push(rt)
    await rt.start()
    // The second instance ended, the first its lastState.
    const ended = await until('the second instance ended', () => {
      const c = app(rt)
      return c.restartCount === 1 && c.state?.terminated && c.lastState?.terminated ? {c, at: Date.now()} : undefined
    })
    expect(ended.c.state!.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    expect(ended.c.lastState!.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    const waiting = await until('CrashLoopBackOff', () => {
      const c = app(rt)
      return c.state?.waiting?.reason === 'CrashLoopBackOff' ? {c, at: Date.now()} : undefined
    })
    expect(waiting.at - ended.at).toBeGreaterThanOrEqual(800)
    expect(waiting.c.restartCount).toBe(1)
    expect(waiting.c.state!.waiting!.message).toBe('back-off 5s restarting failed container=app pod=cache_ns(uid-cache)')
    expect(waiting.c.lastState?.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    // Every report in between said terminated: none said CrashLoopBackOff before the sync after the one that found it.
    const shown = reports.map((p) => p.status!.containerStatuses![0]).filter((c) => c.restartCount === 1 && !c.state?.running)
    const firstWaiting = shown.findIndex((c) => c.state?.waiting)
    expect(shown.slice(0, firstWaiting).length).toBeGreaterThan(0)
    expect(shown.slice(0, firstWaiting).every((c) => c.state?.terminated?.exitCode === 3)).toBe(true)
  })

  test('restartPolicy Never: a failed init container fails the pod and the containers never start', async () => {
    const p = pod('init', 'sleep 30', {restartPolicy: 'Never', initContainers: [{name: 'setup', image: 'busybox', command: ['/bin/sh', '-c', 'exit 2']}]})
    const {rt, events} = runtime(p)
    open.push(rt)
    await rt.start()
    const setup = await until('the init container terminated', () => rt.status().initContainerStatuses![0].state?.terminated)
    expect(setup).toMatchObject({exitCode: 2, reason: 'Error'})
    await new Promise((r) => setTimeout(r, 300))
    expect(app(rt).state?.waiting?.reason).toBe('PodInitializing')
    expect(events.filter((e) => e.reason === 'Started').map((e) => e.fieldPath)).toEqual(['spec.initContainers{setup}'])
  })

  test("a sidecar starts in its init containers' place and the regular container on the sync after the relist that sees it run", async () => {
    const p = pod('sidecar', 'sleep 30', {initContainers: [{name: 'proxy', image: 'busybox', restartPolicy: 'Always', command: ['/bin/sh', '-c', 'sleep 30']}]})
    const {rt, events} = runtime(p, undefined, {relistPeriodMs: 400, syncBackoffMs: 100, jitter: 0})
    open.push(rt)
    const before = Date.now()
    await rt.start()
    await until('app running', () => app(rt).state?.running)
    expect(events.filter((e) => e.reason === 'Started').map((e) => e.fieldPath)).toEqual(['spec.initContainers{proxy}', 'spec.containers{app}'])
    const proxyAt = new Date(rt.status().initContainerStatuses![0].state!.running!.startedAt!).getTime()
    expect(proxyAt).toBeLessThan(Math.ceil((before + 1) / 400) * 400 + 400)
    // Not with the sidecar: once the relist after its start has seen it.
    expect(new Date(app(rt).state!.running!.startedAt!).getTime()).toBeGreaterThanOrEqual(Math.ceil((proxyAt + 1) / 400) * 400)
    expect(rt.status().initContainerStatuses![0].state?.running).toBeDefined()
    expect(app(rt).state?.running).toBeDefined()
  })

  test('a stop runs preStop, then SIGTERM; a container that ignores it is killed when the grace is over, never sooner than 2 s after SIGTERM', async () => {
    const mark = join(tempDir('vnode-trap-'), 'set')
    const p = pod('stubborn', trapLoop('', mark))
    const {rt, events, stateDir} = runtime(p)
    const marker = join(stateDir, 'prestop')
    p.spec!.containers[0].lifecycle = {preStop: {exec: {command: ['/bin/sh', '-c', `echo prestop >> ${marker}`]}}}
    open.push(rt)
    await rt.start()
    await until('its trap is set', () => existsSync(mark))
    const t = Date.now()
    await rt.terminate(1)
    const took = Date.now() - t
    expect(readFileSync(marker, 'utf8')).toBe('prestop\n')
    expect(took).toBeGreaterThanOrEqual(MinimumKillGraceMs - 50)
    expect(took).toBeLessThan(MinimumKillGraceMs + 3_000)
    expect(app(rt).state?.terminated).toMatchObject({exitCode: 137, reason: 'Error'})
    expect(events.filter((e) => e.reason === 'Killing').map((e) => e.message)).toEqual(['Stopping container app'])
    expect(rt.quiet).toBe(true)
  })

  test("a delete during a sync's kill lets that kill keep its grace, then terminates (the kubelet's SyncPod is not cancelled); its own stops get the whole grace", async () => {
    const marks = tempDir('vnode-trap-')
    const p = pod('killed-twice', trapLoop('', join(marks, 'app')), {
      terminationGracePeriodSeconds: 4,
      containers: [
        {name: 'app', image: 'busybox', command: ['/bin/sh', '-c', trapLoop('', join(marks, 'app'))]},
        {name: 'other', image: 'busybox', command: ['/bin/sh', '-c', trapLoop('', join(marks, 'other'))]},
      ],
    })
    const {rt, events} = runtime(p)
    open.push(rt)
    await rt.start()
    await until('both running', () => rt.status().containerStatuses!.every((c) => c.state?.running) || undefined)
    await until('their traps are set', () => existsSync(join(marks, 'app')) && existsSync(join(marks, 'other')))
    await rt.update({...rt.pod, metadata: {...rt.pod.metadata, annotations: {[RestartAnnotation]: 'app:1'}}})
    await until('the restart kill', () => events.some((e) => e.reason === 'Killing'))
    const killedAt = Date.now()
    await rt.terminate(0)
    const took = Date.now() - killedAt
    // The restart's kill waited out its 4 s; the termination's own kill of the other container came after it, with
    // at least the 2 s minimum from its SIGTERM.
    expect(took).toBeGreaterThanOrEqual(4_000 + MinimumKillGraceMs - 100)
    expect(took).toBeLessThan(4_000 + MinimumKillGraceMs + 3_000)
    expect(events.filter((e) => e.reason === 'Killing').map((e) => [e.message, e.fieldPath])).toEqual([
      ['Container app restart requested (vnode.dev/restart=app:1), will be restarted', 'spec.containers{app}'],
      ['Stopping container other', 'spec.containers{other}'],
    ])
    expect(app(rt).restartCount).toBe(0)
    expect(rt.quiet).toBe(true)
  })

  test('a probe kill that leaves its container in back-off says so at its own sync and again at the relist that sees the exit', async () => {
    const p = pod('probed', 'trap "exit 0" TERM; while :; do sleep 0.05; done')
    p.spec!.containers[0].livenessProbe = {exec: {command: ['/bin/sh', '-c', 'exit 1']}, periodSeconds: 1, failureThreshold: 1}
    // A back-off outlasting the test and a pod worker back-off far longer than a relist: only the relist brings a sync soon.
    const {rt, events} = runtime(p, {initialMs: 60_000, maxMs: 60_000, resetMs: 600_000}, {relistPeriodMs: 500, syncBackoffMs: 30_000, jitter: 0})
    open.push(rt)
    await rt.start()
    const backOffs = () => events.filter((e) => e.reason === 'BackOff')
    // The first two kills restart at once (no ended instance to judge from), the third leaves the container in back-off.
    await until('the first BackOff', () => backOffs().length > 0, 9_000)
    // The relist comes within 500 ms; the pod worker's back-off only after 30 s. The bound leaves room for a loaded host.
    await until("the relist's BackOff", () => backOffs().length > 1, 10_000)
    expect(events.filter((e) => e.reason === 'Killing')).toHaveLength(3)
    expect(app(rt).state?.waiting?.reason).toBe('CrashLoopBackOff')
  }, 25_000)

  test('a changed restart annotation restarts the container it names as a changed definition does: Killing, the grace, restartCount + 1, no back-off', async () => {
    const mark = join(tempDir('vnode-trap-'), 'set')
    const p = pod('restarted', trapLoop('exit 0', mark), {
      initContainers: [{name: 'proxy', image: 'busybox', restartPolicy: 'Always', command: ['/bin/sh', '-c', 'sleep 30']}],
    })
    const {rt, events} = runtime(p)
    open.push(rt)
    await rt.start()
    // The regular container starts once the relist has seen the sidecar run.
    const first = (await until('app running', () => (app(rt).state?.running ? app(rt) : undefined))).containerID
    await until('its trap is set', () => existsSync(mark))
    const annotate = (value: string): V1Pod => ({...rt.pod, metadata: {...rt.pod.metadata, annotations: {[RestartAnnotation]: value}}})
    await rt.update(annotate('app:1'))
    const again = await until('app running again', () => (app(rt).state?.running && app(rt).containerID !== first ? app(rt) : undefined))
    expect(again.restartCount).toBe(1)
    expect(again.lastState?.terminated).toMatchObject({exitCode: 0})
    expect(events.filter((e) => e.reason === 'Killing').map((e) => [e.message, e.fieldPath])).toEqual([
      ['Container app restart requested (vnode.dev/restart=app:1), will be restarted', 'spec.containers{app}'],
    ])
    // The same value again, or another annotation changing, restarts nothing; the sidecar was never touched.
    await rt.update(annotate('app:1'))
    await rt.update({...rt.pod, metadata: {...rt.pod.metadata, labels: {x: 'y'}}})
    expect(app(rt).restartCount).toBe(1)
    expect(rt.status().initContainerStatuses![0].restartCount).toBe(0)
    expect(events.filter((e) => e.reason === 'Killing')).toHaveLength(1)
  })

  test('a restart annotation starts a container waiting in CrashLoopBackOff at once (a fix saved during a long back-off)', async () => {
    const {rt} = runtime(pod('looping', 'exit 3'), {initialMs: 60_000, maxMs: 60_000, resetMs: 600_000})
    open.push(rt)
    await rt.start()
    await until('CrashLoopBackOff', () => app(rt).state?.waiting?.reason === 'CrashLoopBackOff')
    const before = app(rt).restartCount
    await rt.update({...rt.pod, metadata: {...rt.pod.metadata, annotations: {[RestartAnnotation]: 'app:1'}}})
    await until('a restart well within the back-off', () => app(rt).restartCount > before, 5_000)
  })
})
