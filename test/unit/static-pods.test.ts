import {afterEach, describe, expect, jest, test} from '@jest/globals'
import type {CoreV1Api, KubeConfig, V1Pod} from '@kubernetes/client-node'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {AdmissionNode} from '../../src/emulator/pods/admission.js'
import {decodeStaticPod} from '../../src/emulator/pods/file-source.js'
import {isMirrorPodOf, mirrorPodFor} from '../../src/emulator/pods/mirror.js'
import {PodController} from '../../src/emulator/pods/pod-controller.js'
import {TestProvider} from '../support/test-provider.js'

type Call = {op: 'create' | 'delete' | 'patch'; name: string; uid?: string; grace?: number; body?: unknown}
const err = (code: number) => Object.assign(new Error(`HTTP ${code}`), {code})

/** Pods as the API server keeps them, with UID preconditions; every change is fed back as the watch would. */
class FakeApi {
  readonly pods = new Map<string, V1Pod>()
  readonly calls: Call[] = []
  controller?: PodController
  private seq = 0
  private rv = 0
  private key = (ns: string, name: string) => `${ns}/${name}`
  private feed(fn: () => void) {
    setImmediate(() => this.controller && fn())
  }
  /** An object put into the API by someone else (a user, an earlier run). */
  put(p: V1Pod): V1Pod {
    const pod = structuredClone(p)
    pod.metadata!.uid ??= `api-${++this.seq}`
    pod.metadata!.resourceVersion = String(++this.rv)
    this.pods.set(this.key(pod.metadata!.namespace!, pod.metadata!.name!), pod)
    return structuredClone(pod)
  }
  /** The next creates fail as for a namespace that does not exist. */
  failCreates = 0
  async createNamespacedPod(p: {namespace: string; body: V1Pod}) {
    const body = structuredClone(p.body)
    if (this.failCreates > 0) {
      this.failCreates--
      this.calls.push({op: 'create', name: body.metadata!.name!})
      throw Object.assign(err(404), {body: {reason: 'NotFound', message: `namespaces "${p.namespace}" not found`}})
    }
    if (this.pods.has(this.key(p.namespace, body.metadata!.name!))) throw err(409)
    body.metadata!.uid = `mirror-${++this.seq}`
    body.metadata!.resourceVersion = String(++this.rv)
    body.status = {phase: 'Pending'}
    this.pods.set(this.key(p.namespace, body.metadata!.name!), body)
    this.calls.push({op: 'create', name: body.metadata!.name!, uid: body.metadata!.uid, body})
    const copy = structuredClone(body)
    this.feed(() => this.controller!.upsert(copy))
    return structuredClone(body)
  }
  async deleteNamespacedPod(p: {name: string; namespace: string; gracePeriodSeconds?: number; body?: {preconditions?: {uid?: string}}}) {
    const pod = this.pods.get(this.key(p.namespace, p.name))
    if (!pod) throw err(404)
    if (p.body?.preconditions?.uid && p.body.preconditions.uid !== pod.metadata!.uid) throw err(409)
    this.pods.delete(this.key(p.namespace, p.name))
    this.calls.push({op: 'delete', name: p.name, uid: pod.metadata!.uid, grace: p.gracePeriodSeconds})
    this.feed(() => this.controller!.delete(pod))
    return pod
  }
  async patchNamespacedPodStatus(p: {name: string; namespace: string; body: {metadata: {uid: string}; status: V1Pod['status']}}) {
    const pod = this.pods.get(this.key(p.namespace, p.name))
    if (!pod) throw err(404)
    if (p.body.metadata.uid !== pod.metadata!.uid) throw err(409)
    pod.status = p.body.status
    this.calls.push({op: 'patch', name: p.name, uid: p.body.metadata.uid, body: p.body.status})
    return structuredClone(pod)
  }
  /** kubectl delete (graceful): the API only sets deletionTimestamp; the node finishes it. */
  markDeleting(ns: string, name: string) {
    const pod = this.pods.get(this.key(ns, name))!
    pod.metadata!.deletionTimestamp = new Date()
    pod.metadata!.deletionGracePeriodSeconds = 30
    pod.metadata!.resourceVersion = String(++this.rv)
    const copy = structuredClone(pod)
    this.feed(() => this.controller!.upsert(copy))
  }
  /** kubectl delete --force: the object is gone at once. */
  forceDelete(ns: string, name: string) {
    const pod = this.pods.get(this.key(ns, name))!
    this.pods.delete(this.key(ns, name))
    this.feed(() => this.controller!.delete(pod))
  }
  mirror(ns: string, name: string) {
    return this.pods.get(this.key(ns, name))
  }
}

const node: AdmissionNode = {name: 'n1', labels: {}, taints: [], allocatable: {cpu: '4', memory: '8Gi', pods: '110'}}
const yaml = (name: string, extra = '') => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: busybox
${extra}`

const until = async (fn: () => boolean, what: string, ms = 5_000) => {
  const end = Date.now() + ms
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

jest.setTimeout(20_000)

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f()
})

function setup(opts: {manifestsDir?: string} = {}) {
  const api = new FakeApi()
  const provider = new TestProvider()
  const events: {kind?: string; name?: string; type: string; reason: string; message: string}[] = []
  const errors: string[] = []
  const c = new PodController({
    core: api as unknown as CoreV1Api,
    kc: {} as KubeConfig,
    nodeName: 'n1',
    nodeIP: '10.0.0.9',
    provider,
    recorder: {record: async (o, type, reason, message) => void events.push({kind: o.kind, name: o.name, type, reason, message}), forget: () => undefined},
    node: async () => node,
    nodeOwner: async () => ({name: 'n1', uid: 'node-uid'}),
    statusCoalesceMs: 10,
    mirrorRetryInitialMs: 20,
    manifestsDir: opts.manifestsDir,
  })
  c.on('error', (m) => errors.push(m))
  api.controller = c
  cleanups.push(async () => {
    await c.stop()
    api.controller = undefined
  })
  return {api, provider, c, events, errors}
}

/** What start() does, without the API watch: the API source's first (empty) list, then the file source. */
async function begin(c: PodController): Promise<void> {
  c.list([])
  await c.fileSource?.start()
}

function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'vnode-static-'))
  cleanups.push(() => rmSync(d, {recursive: true, force: true}))
  return d
}

describe('mirror pod objects', () => {
  test('a mirror copies the static pod with config.mirror = its hash, owned by the Node, without UID or status', () => {
    const pod = decodeStaticPod(yaml('web'), '/m/web.yaml', 'n1')
    pod.metadata!.annotations!['kubernetes.io/config.source'] = 'file'
    const m = mirrorPodFor(pod, {name: 'n1', uid: 'node-uid'})
    expect(m.metadata).toEqual({
      name: 'web-n1',
      namespace: 'default',
      annotations: {'kubernetes.io/config.hash': pod.metadata!.uid, 'kubernetes.io/config.source': 'file', 'kubernetes.io/config.mirror': pod.metadata!.uid},
      ownerReferences: [{apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'node-uid', controller: true}],
    })
    expect(m.status).toBeUndefined()
    expect(isMirrorPodOf({...m, metadata: {...m.metadata, uid: 'x'}}, pod)).toBe(true)
    const edited = decodeStaticPod(yaml('web', '  restartPolicy: Never\n'), '/m/web.yaml', 'n1')
    expect(isMirrorPodOf(m, edited)).toBe(false)
  })
})

describe('static pods through the pod controller (fake API server, test provider)', () => {
  test('a static pod runs, gets a mirror, and its status is written onto the mirror with the mirror UID as precondition', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web'))
    const {api, provider, c} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'Running on the mirror')
    const m = api.mirror('default', 'web-n1')!
    const uid = c.fileConfig!.values()[0].metadata!.uid!
    expect(m.metadata!.annotations).toMatchObject({'kubernetes.io/config.mirror': uid, 'kubernetes.io/config.hash': uid, 'kubernetes.io/config.source': 'file'})
    expect(api.calls.filter((x) => x.op === 'patch').every((x) => x.uid === m.metadata!.uid)).toBe(true)
    expect(provider.calls.map((x) => [x.op, x.uid])).toEqual([['create', uid]])
    // The feed shows the static pod (its own UID) with the status written.
    expect(c.pods().find((p) => p.metadata!.uid === uid)?.status?.phase).toBe('Running')
  })

  test('a mirror deleted out of band (force or graceful) comes back, and gets the status again', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web'))
    const {api, provider, c} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'Running')
    const first = api.mirror('default', 'web-n1')!.metadata!.uid
    api.forceDelete('default', 'web-n1')
    await until(
      () => !!api.mirror('default', 'web-n1') && api.mirror('default', 'web-n1')!.metadata!.uid !== first && api.mirror('default', 'web-n1')!.status?.phase === 'Running',
      'a new mirror, Running',
    )
    const second = api.mirror('default', 'web-n1')!.metadata!.uid
    api.markDeleting('default', 'web-n1')
    await until(() => api.mirror('default', 'web-n1')?.metadata?.uid !== second && api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'a third mirror')
    // The graceful one was finished by the node: grace 0 with its UID as precondition.
    expect(api.calls.find((x) => x.op === 'delete')).toMatchObject({uid: second, grace: 0})
    // The static pod itself never stopped.
    expect(provider.calls.map((x) => x.op)).toEqual(['create'])
  })

  test('editing a manifest replaces the pod: old one killed, new UID started after it, mirror replaced', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web', '    env: [{name: TEST_TERM_EXIT_MS, value: "200"}]\n'))
    const {api, provider, c} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'Running')
    const oldUid = c.fileConfig!.values()[0].metadata!.uid!
    const oldMirror = api.mirror('default', 'web-n1')!.metadata!.uid
    writeFileSync(join(d, 'web.yaml'), yaml('web', '    env: [{name: EDITED, value: "1"}]\n'))
    await until(() => provider.calls.some((x) => x.op === 'create' && x.uid !== oldUid), 'the new pod started')
    const newUid = c.fileConfig!.values()[0].metadata!.uid!
    expect(newUid).not.toBe(oldUid)
    const kill = provider.calls.find((x) => x.op === 'delete' && x.uid === oldUid)!
    const start = provider.calls.find((x) => x.op === 'create' && x.uid === newUid)!
    expect(kill.grace).toBe(5)
    // The new pod starts only once the old one has stopped (about 200 ms after SIGTERM).
    expect(start.at - kill.at).toBeGreaterThanOrEqual(150)
    await until(
      () => api.mirror('default', 'web-n1')?.metadata?.annotations?.['kubernetes.io/config.mirror'] === newUid && api.mirror('default', 'web-n1')?.status?.phase === 'Running',
      'the new mirror Running',
    )
    expect(api.calls.some((x) => x.op === 'delete' && x.uid === oldMirror)).toBe(true)
    await c.settled()
    expect(c.status.size).toBe(1)
  })

  test('removing a manifest kills the pod, then deletes its mirror; nothing is left', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web', '    env: [{name: TEST_TERM_EXIT_MS, value: "200"}]\n'))
    writeFileSync(join(d, 'db.yaml'), yaml('db'))
    const {api, provider, c} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running' && api.mirror('default', 'db-n1')?.status?.phase === 'Running', 'both Running')
    const mirrorUid = api.mirror('default', 'web-n1')!.metadata!.uid
    rmSync(join(d, 'web.yaml'))
    await until(() => !api.mirror('default', 'web-n1'), 'the mirror deleted')
    const kill = provider.calls.find((x) => x.op === 'delete' && x.name === 'web-n1')!
    const del = api.calls.find((x) => x.op === 'delete' && x.uid === mirrorUid)!
    expect(kill).toBeDefined()
    // The terminal status went to the mirror before it was deleted.
    const lastPatch = api.calls.filter((x) => x.op === 'patch' && x.uid === mirrorUid).at(-1)!
    expect((lastPatch.body as {phase: string}).phase).toBe('Succeeded')
    expect(api.calls.indexOf(lastPatch)).toBeLessThan(api.calls.indexOf(del))
    await c.settled()
    expect(provider.size).toBe(1)
    expect(c.status.size).toBe(1)
    expect(c.mirrors.size).toBe(1)
    expect(c.mirrors.pending).toBe(0)
    expect(api.mirror('default', 'db-n1')?.status?.phase).toBe('Running')
  })

  test('mirror pods seen through the API are never run as pods of their own', async () => {
    const {api, provider, c} = setup()
    const pod = decodeStaticPod(yaml('web'), '/m/web.yaml', 'other-node')
    const mirror = api.put({...mirrorPodFor(pod, {name: 'n1', uid: 'node-uid'}), spec: {...pod.spec!, nodeName: 'n1'}})
    c.list([])
    c.upsert(mirror)
    await c.settled()
    expect(provider.calls).toEqual([])
    expect(c.config.size).toBe(0)
  })

  test('before every source is seen, nothing is deleted: no pod killed, no orphaned mirror removed', async () => {
    const {api, provider, c} = setup({manifestsDir: '/nonexistent'})
    // A mirror left by an earlier run, whose manifest has not been read yet.
    const old = decodeStaticPod(yaml('web'), '/m/web.yaml', 'n1')
    const orphan = api.put(mirrorPodFor(old, {name: 'n1', uid: 'node-uid'}))
    const apiPod = api.put({metadata: {name: 'job', namespace: 'ns'}, spec: {nodeName: 'n1', containers: [{name: 'app', image: 'busybox'}]}, status: {phase: 'Pending'}})
    c.list([orphan, apiPod])
    await until(() => provider.calls.some((x) => x.op === 'create'), 'the API pod started')
    c.delete(apiPod)
    await c.settled()
    await new Promise((r) => setTimeout(r, 100))
    expect(provider.calls.map((x) => x.op)).toEqual(['create'])
    expect(api.calls.filter((x) => x.op === 'delete')).toEqual([])
    expect(c.sourcesReady).toBe(false)
    // The (empty) file listing arrives: now the held deletions go ahead.
    c.setFile([])
    await until(() => provider.calls.some((x) => x.op === 'delete'), 'the held REMOVE')
    await until(() => !api.mirror('default', 'web-n1'), 'the orphaned mirror deleted')
    expect(c.sourcesReady).toBe(true)
  })

  test('a bad manifest is skipped with a Warning on the Node and an error line; the other pods run', async () => {
    const d = dir()
    writeFileSync(join(d, 'good.yaml'), yaml('good'))
    writeFileSync(join(d, 'broken.yaml'), 'spec: [')
    writeFileSync(join(d, 'secret.yaml'), yaml('sec', '  volumes: [{name: s, secret: {secretName: creds}}]\n'))
    const {api, c, events, errors} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'good-n1')?.status?.phase === 'Running', 'the good pod Running')
    const warnings = events.filter((e) => e.type === 'Warning')
    expect(warnings.map((e) => [e.kind, e.name, e.reason])).toEqual([
      ['Node', 'n1', 'FailedValidation'],
      ['Node', 'n1', 'FailedValidation'],
    ])
    expect(warnings[0].message).toMatch(new RegExp(`^static pod manifest ${join(d, 'broken.yaml')} skipped: cannot parse: `))
    expect(warnings[1].message).toBe(`static pod manifest ${join(d, 'secret.yaml')} skipped: spec.volumes[0].secret: static pods may not reference secrets`)
    expect(errors).toEqual(warnings.map((w) => w.message))
    expect(api.mirror('default', 'sec-n1')).toBeUndefined()
  })

  test('a mirror that cannot be created is retried with backoff and reported once; the pod runs meanwhile', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web'))
    const {api, provider, c, errors} = setup({manifestsDir: d})
    api.failCreates = 3
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'the mirror made at last, Running')
    expect(api.calls.filter((x) => x.op === 'create')).toHaveLength(4)
    expect(errors).toEqual(['creating mirror pod default/web-n1: NotFound: namespaces "default" not found'])
    expect(provider.calls.map((x) => x.op)).toEqual(['create'])
    await c.settled()
    expect(c.mirrors.pending).toBe(0)
  })

  test('an empty manifest directory counts as seen', async () => {
    const {c} = setup({manifestsDir: dir()})
    await begin(c)
    await c.settled()
    expect(c.sourcesReady).toBe(true)
  })

  test('stop closes the file watcher, timers and mirror work', async () => {
    const d = dir()
    writeFileSync(join(d, 'web.yaml'), yaml('web'))
    const {api, c} = setup({manifestsDir: d})
    await begin(c)
    await until(() => api.mirror('default', 'web-n1')?.status?.phase === 'Running', 'Running')
    expect(c.fileSource!.handles).toBe(2)
    await c.shutdown(1)
    await c.stop()
    expect(c.fileSource!.handles).toBe(0)
    expect(c.mirrors.pending).toBe(0)
    expect(c.mirrors.size).toBe(0)
    expect(c.status.size).toBe(0)
    // The final status of a node shutdown stays on the mirror.
    expect(api.mirror('default', 'web-n1')?.status?.phase).toBe('Failed')
  })
})
