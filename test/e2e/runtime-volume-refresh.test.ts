import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {DefaultVolumeResyncMs} from '../../src/emulator/runtime/volumes/refresh.js'
import {describeE2e, runDir, waitFor} from './helpers.js'
import {nodeContainer, RuntimeHarness} from './runtime-harness.js'
import {LOOP_READER, type Seen, versioned} from './volume-reader.js'

describeE2e('runtime: ConfigMap, Secret, projected and downwardAPI volumes follow their sources', () => {
  const h = new RuntimeHarness()
  let out: string
  beforeAll(async () => {
    await h.setUp({configRetry: {initialMs: 300, maxMs: 1000}})
    out = mkdtempSync(join(runDir(), 'rt-refresh-'))
  })
  afterAll(() => h.tearDown())

  const seen = (name: string): Seen | undefined => (existsSync(join(out, name)) ? (JSON.parse(readFileSync(join(out, name), 'utf8')) as Seen) : undefined)
  const lastSeen = (name: string, file: string) => seen(name)?.seen[file]?.at(-1)
  /** Waits for the reader to see value in file, within the kubelet's sync period. */
  const sees = (name: string, file: string, value: string) =>
    waitFor(
      () => lastSeen(name, file) === value,
      () => `${file} reading ${value.slice(0, 20)} (last: ${lastSeen(name, file)?.slice(0, 40)})`,
      DefaultVolumeResyncMs,
      50,
    )

  test('a ConfigMap, a Secret, a projected and a downwardAPI volume are rewritten while a process reads them: each change seen within the period, no torn read, subPath and env unchanged', async () => {
    const {core} = h.c
    const ns = h.ns
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'live-cm'}, data: {conf: versioned('cm1'), small: 'a'}}})
    await core.createNamespacedSecret({namespace: ns, body: {metadata: {name: 'live-secret'}, stringData: {pass: versioned('s1')}}})
    const files = ['cm/conf', 'sec/pass', 'proj/conf', 'proj/pass', 'proj/labels', 'info/labels', 'info/annotations', 'pinned/conf']
    const pod = await h.run({
      metadata: {name: 'live', labels: {stage: 'one'}, annotations: {note: 'first'}},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [
          {name: 'cm', configMap: {name: 'live-cm'}},
          {name: 'sec', secret: {secretName: 'live-secret'}},
          {
            name: 'proj',
            projected: {
              sources: [
                {configMap: {name: 'live-cm', items: [{key: 'conf', path: 'conf'}]}},
                {secret: {name: 'live-secret', items: [{key: 'pass', path: 'pass'}]}},
                {downwardAPI: {items: [{path: 'labels', fieldRef: {fieldPath: 'metadata.labels'}}]}},
              ],
            },
          },
          {
            name: 'info',
            downwardAPI: {
              items: [
                {path: 'labels', fieldRef: {fieldPath: 'metadata.labels'}},
                {path: 'annotations', fieldRef: {fieldPath: 'metadata.annotations'}},
              ],
            },
          },
        ],
        containers: [
          nodeContainer('app', LOOP_READER, {
            env: [
              {name: 'OUT', value: join(out, 'live.json')},
              {name: 'FILES', value: files.join(',')},
              {name: 'ENVV', valueFrom: {configMapKeyRef: {name: 'live-cm', key: 'small'}}},
            ],
            volumeMounts: [
              {name: 'cm', mountPath: '/cm'},
              {name: 'sec', mountPath: '/sec'},
              {name: 'proj', mountPath: '/proj'},
              {name: 'info', mountPath: '/info'},
              {name: 'cm', mountPath: '/pinned/conf', subPath: 'conf'},
            ],
          }),
        ],
      },
    })
    await sees('live.json', 'cm/conf', 'cm1')
    expect(seen('live.json')!.seen).toEqual({
      'cm/conf': ['cm1'],
      'sec/pass': ['s1'],
      'proj/conf': ['cm1'],
      'proj/pass': ['s1'],
      'proj/labels': ['stage="one"'],
      'info/labels': ['stage="one"'],
      'info/annotations': ['note="first"'],
      'pinned/conf': ['cm1'],
    })
    // The kubelet's layout: top-level names are links through ..data to a timestamped directory.
    const vol = join(h.stateDir, 'pods', pod.metadata!.uid!, 'volumes', 'cm')
    expect(readlinkSync(join(vol, 'conf'))).toBe('..data/conf')
    expect(readlinkSync(join(vol, '..data'))).toMatch(/^\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\./)

    await core.replaceNamespacedConfigMap({name: 'live-cm', namespace: ns, body: {metadata: {name: 'live-cm'}, data: {conf: versioned('cm2'), small: 'b'}}})
    await sees('live.json', 'cm/conf', 'cm2')
    await sees('live.json', 'proj/conf', 'cm2')
    await core.replaceNamespacedSecret({name: 'live-secret', namespace: ns, body: {metadata: {name: 'live-secret'}, stringData: {pass: versioned('s2')}}})
    await sees('live.json', 'sec/pass', 's2')
    await sees('live.json', 'proj/pass', 's2')
    // Labels and annotations reach the provider as a pod update, as the pod source delivers them.
    const relabelled: V1Pod = structuredClone(pod)
    relabelled.metadata!.labels = {stage: 'two'}
    relabelled.metadata!.annotations = {note: 'second'}
    await h.provider.updatePod(relabelled)
    await sees('live.json', 'info/labels', 'stage="two"')
    await sees('live.json', 'info/annotations', 'note="second"')
    await sees('live.json', 'proj/labels', 'stage="two"')
    await core.replaceNamespacedConfigMap({name: 'live-cm', namespace: ns, body: {metadata: {name: 'live-cm'}, data: {conf: versioned('cm3'), small: 'c'}}})
    await sees('live.json', 'cm/conf', 'cm3')

    const s = seen('live.json')!
    // Every read saw a whole version, old or new, in order: never a mix, never a missing file.
    expect(s.seen['cm/conf']).toEqual(['cm1', 'cm2', 'cm3'])
    expect(s.seen['sec/pass']).toEqual(['s1', 's2'])
    expect(s.seen['proj/pass']).toEqual(['s1', 's2'])
    expect(s.seen['info/labels']).toEqual(['stage="one"', 'stage="two"'])
    // The subPath keeps what it had when the container started; so does the env.
    expect(s.seen['pinned/conf']).toEqual(['cm1'])
    expect(s.env).toBe('a')
    // The reader really was reading all along (a loaded machine reads fewer).
    expect(s.reads).toBeGreaterThan(200)
    // Old versions are gone (removed right after the swap): one timestamped directory per volume.
    await waitFor(
      () => readdirSync(vol).filter((e) => e.startsWith('..2')).length === 1,
      () => `one version left (${readdirSync(vol).join(' ')})`,
      5_000,
      50,
    )
    expect(h.container('live', 'app')!.restartCount).toBe(0)
  }, 120_000)

  test('bad sources: a deleted object, a removed key and a Secret too large keep the last content (FailedMount where the kubelet gives one); the pod keeps running', async () => {
    const {core} = h.c
    const ns = h.ns
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'doomed-cm'}, data: {conf: 'v1'}}})
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'keyed-cm'}, data: {wanted: 'w1'}}})
    await core.createNamespacedSecret({namespace: ns, body: {metadata: {name: 'big-secret'}, stringData: {pass: 'p1'}}})
    await h.run({
      metadata: {name: 'bad'},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [
          {name: 'doomed', configMap: {name: 'doomed-cm'}},
          {name: 'keyed', configMap: {name: 'keyed-cm', items: [{key: 'wanted', path: 'wanted'}]}},
          {name: 'big', secret: {secretName: 'big-secret'}},
        ],
        containers: [
          nodeContainer('app', LOOP_READER, {
            env: [
              {name: 'OUT', value: join(out, 'bad.json')},
              {name: 'FILES', value: 'doomed/conf,keyed/wanted,big/pass'},
            ],
            volumeMounts: [
              {name: 'doomed', mountPath: '/doomed'},
              {name: 'keyed', mountPath: '/keyed'},
              {name: 'big', mountPath: '/big'},
            ],
          }),
        ],
      },
    })
    await sees('bad.json', 'big/pass', 'p1')

    await core.deleteNamespacedConfigMap({name: 'doomed-cm', namespace: ns})
    const deleted = await h.waitEvent('bad', (e) => e.reason === 'FailedMount' && e.message!.includes('doomed'), 'FailedMount for the deleted ConfigMap', DefaultVolumeResyncMs)
    expect(deleted).toMatchObject({type: 'Warning', message: 'MountVolume.SetUp failed for volume "doomed" : configmap "doomed-cm" not found'})

    await core.replaceNamespacedConfigMap({name: 'keyed-cm', namespace: ns, body: {metadata: {name: 'keyed-cm'}, data: {other: 'o'}}})
    const keyless = await h.waitEvent('bad', (e) => e.reason === 'FailedMount' && e.message!.includes('keyed'), 'FailedMount for the removed key', DefaultVolumeResyncMs)
    expect(keyless.message).toBe('MountVolume.SetUp failed for volume "keyed" : configmap references non-existent config key: wanted')

    // The API server refuses a Secret over 1 MiB: what is mounted stays.
    const tooLarge = core.replaceNamespacedSecret({name: 'big-secret', namespace: ns, body: {metadata: {name: 'big-secret'}, stringData: {pass: 'y'.repeat(1024 * 1024 + 1)}}})
    await expect(tooLarge).rejects.toMatchObject({code: 422})

    await new Promise((r) => setTimeout(r, 1500))
    const s = seen('bad.json')!
    expect(s.seen['doomed/conf']).toEqual(['v1'])
    expect(s.seen['keyed/wanted']).toEqual(['w1'])
    expect(s.seen['big/pass']).toEqual(['p1'])
    const app = h.container('bad', 'app')!
    expect(app.state?.running).toBeTruthy()
    expect(app.restartCount).toBe(0)

    // A source that comes back is written again.
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'doomed-cm'}, data: {conf: 'v2'}}})
    await sees('bad.json', 'doomed/conf', 'v2')
  }, 120_000)

  test('one watch per referenced object, however many pods use it; every watch is closed once the last pod using it is gone', async () => {
    const {core} = h.c
    const ns = h.ns
    // Whatever earlier tests left registered goes first.
    for (const name of ['live', 'bad']) {
      const p = h.latest.get(name)
      if (p) {
        await h.provider.deletePod(p, 0)
        await h.provider.cleanupPod(p)
      }
    }
    expect(h.counter.openWatches).toBe(0)
    const before = (k: string) => h.counter.byResource.get(k) ?? 0
    const [gets, watches] = [before('GET configmaps'), before('WATCH configmaps')]
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'shared'}, data: {k: 'v'}}})
    const Burst = 100
    const pods: V1Pod[] = []
    for (let i = 0; i < Burst; i++) {
      pods.push(
        await h.apiPod({
          metadata: {name: `burst-${i}`},
          spec: {
            terminationGracePeriodSeconds: 1,
            volumes: [{name: 'c', configMap: {name: 'shared'}}],
            containers: [
              {
                name: 'app',
                image: 'sleep:test',
                command: ['/bin/sleep', '3600'],
                env: [{name: 'K', valueFrom: {configMapKeyRef: {name: 'shared', key: 'k'}}}],
                volumeMounts: [{name: 'c', mountPath: '/c'}],
              },
            ],
          },
        }),
      )
    }
    await Promise.all(pods.map((p) => h.provider.createPod(structuredClone(p))))
    await waitFor(() => pods.every((p) => h.container(p.metadata!.name!, 'app')?.state?.running), 'the burst running', 120_000, 200)
    // One list and one watch of the ConfigMap for all of them: not two reads per pod.
    expect(before('GET configmaps') - gets).toBe(1)
    expect(before('WATCH configmaps') - watches).toBe(1)
    expect(h.counter.openWatches).toBe(1)

    await Promise.all(pods.slice(1).map((p) => h.provider.deletePod(p, 0)))
    await Promise.all(pods.slice(1).map((p) => h.provider.cleanupPod(p)))
    // One pod still uses it.
    expect(h.counter.openWatches).toBe(1)
    await h.provider.deletePod(pods[0], 0)
    await h.provider.cleanupPod(pods[0])
    await waitFor(
      () => h.counter.openWatches === 0,
      () => `watches back to baseline (open: ${h.counter.openWatches})`,
      5_000,
      50,
    )
    expect(h.objects.size).toBe(0)
  }, 240_000)

  test('an immutable ConfigMap is read once and not watched, as the kubelet does', async () => {
    await h.c.core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'frozen'}, immutable: true, data: {k: 'ice'}}})
    const pod = await h.run({
      metadata: {name: 'frozen'},
      spec: {
        terminationGracePeriodSeconds: 1,
        volumes: [{name: 'f', configMap: {name: 'frozen'}}],
        containers: [{name: 'app', image: 'sleep:test', command: ['/bin/sleep', '3600'], volumeMounts: [{name: 'f', mountPath: '/f'}]}],
      },
    })
    await h.waitContainer('frozen', 'app', (c) => !!c.state?.running, 'running')
    expect(readFileSync(join(h.stateDir, 'pods', pod.metadata!.uid!, 'volumes', 'f', 'k'), 'utf8')).toBe('ice')
    await waitFor(
      () => h.counter.openWatches === 0,
      () => `no watch for an immutable object (open: ${h.counter.openWatches})`,
      5_000,
      50,
    )
    await h.provider.deletePod(pod, 0)
    await h.provider.cleanupPod(pod)
    expect(h.objects.size).toBe(0)
  })
})

describeE2e('runtime: projected service account tokens are rotated before 80% of their lifetime', () => {
  const h = new RuntimeHarness()
  let offsetMs = 0
  beforeAll(async () => {
    // The token manager's clock runs ahead on demand; the TokenRequests are real.
    await h.setUp({tokenClock: () => Date.now() + offsetMs, volumeRefresh: {resyncMs: 500}})
  })
  afterAll(() => h.tearDown())

  test('the token file is rewritten once 80% of expirationSeconds have passed, and not before', async () => {
    const tokenDir = 'var/run/secrets/tokens'
    const pod = await h.run({
      metadata: {name: 'tok'},
      spec: {
        terminationGracePeriodSeconds: 1,
        volumes: [{name: 'tok', projected: {sources: [{serviceAccountToken: {path: 'token', expirationSeconds: 600, audience: 'vnode-test'}}]}}],
        containers: [nodeContainer('app', 'setInterval(()=>{},1000)', {volumeMounts: [{name: 'tok', mountPath: `/${tokenDir}`}]})],
      },
    })
    await h.waitContainer('tok', 'app', (c) => !!c.state?.running, 'running')
    const file = join(h.stateDir, 'pods', pod.metadata!.uid!, 'volumes', 'tok', 'token')
    const first = readFileSync(file, 'utf8')
    expect(first.split('.')).toHaveLength(3)
    expect(lstatSync(file).isSymbolicLink()).toBe(true)
    // Several resyncs at 70% of the lifetime: the same token.
    offsetMs = 420_000
    await new Promise((r) => setTimeout(r, 2000))
    expect(readFileSync(file, 'utf8')).toBe(first)
    // Past 80% (and the jitter): a new one.
    offsetMs = 495_000
    const second = await waitFor(
      () => {
        const t = readFileSync(file, 'utf8')
        return t !== first ? t : undefined
      },
      'a rotated token',
      10_000,
      100,
    )
    const claims = JSON.parse(Buffer.from(second.split('.')[1], 'base64url').toString()) as {aud: string[]; 'kubernetes.io'?: {pod?: {uid?: string}}}
    expect(claims.aud).toEqual(['vnode-test'])
    expect(claims['kubernetes.io']?.pod?.uid).toBe(pod.metadata!.uid)
    await h.provider.deletePod(pod, 0)
    await h.provider.cleanupPod(pod)
    expect(h.counter.openWatches).toBe(0)
  }, 60_000)
})
