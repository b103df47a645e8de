import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdtempSync} from 'node:fs'
import {join} from 'node:path'
import {DefaultVolumeResyncMs} from '../../src/emulator/runtime/volumes/refresh.js'
import {createPod, nodeContainer, podOn} from './faults-helpers.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubectl, runDir, startVnode, stopAllVnodes, uniqueName, type VnodeProcess, waitFor} from './helpers.js'
import {LOOP_READER, readSeen, versioned} from './volume-reader.js'

interface Stats {
  openWatches: number
  byResource: Record<string, number>
}

async function stats(p: VnodeProcess): Promise<Stats> {
  const before = p.lines.filter((l) => l.kind === 'stats').length
  p.child.kill('SIGUSR2')
  await p.waitForLine(() => p.lines.filter((l) => l.kind === 'stats').length > before, 'a stats line', 10_000)
  return p.lines.filter((l) => l.kind === 'stats').at(-1)!.summary as Stats
}

/** Runs fn over items with at most `limit` in flight. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({length: limit}, async () => {
      while (next < items.length) await fn(items[next++])
    }),
  )
}

const yaml = (o: unknown) => JSON.stringify(o)

describeE2e("kubectl apply, label and annotate reach a running pod's volumes; the node watches what its pods reference, once", () => {
  let c: Clients
  let p: VnodeProcess
  let out: string
  const ns = uniqueName('cfgref')
  const node = uniqueName('cfgref')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    out = mkdtempSync(join(runDir(), 'cfgref-'))
    p = startVnode(node, ['--no-default-taint', '--pods', '200'])
    await p.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  const podsGone = () => waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, 'the pods deleted', 60_000, 250)

  test('a changed ConfigMap and Secret (kubectl apply) and new labels and annotations (kubectl label/annotate) are in the files within the sync period; watches back to baseline after the pod is gone', async () => {
    const baseline = await stats(p)
    // node, pods and services
    expect(baseline.openWatches).toBe(3)
    const cm = (v: string) => yaml({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'app-config', namespace: ns}, data: {conf: versioned(v)}})
    const secret = (v: string) => yaml({apiVersion: 'v1', kind: 'Secret', metadata: {name: 'app-secret', namespace: ns}, stringData: {pass: versioned(v)}})
    for (const doc of [cm('c1'), secret('s1')]) expect((await kubectl(['apply', '--server-side', '-f', '-'], doc)).exitCode).toBe(0)
    const file = join(out, 'app.json')
    await createPod(
      c.core,
      podOn(
        node,
        ns,
        'app',
        [
          nodeContainer('app', LOOP_READER, {
            env: [
              {name: 'OUT', value: file},
              {name: 'FILES', value: 'cfg/conf,sec/pass,info/labels,info/annotations,pinned'},
            ],
            volumeMounts: [
              {name: 'cfg', mountPath: '/cfg'},
              {name: 'sec', mountPath: '/sec'},
              {name: 'info', mountPath: '/info'},
              {name: 'cfg', mountPath: '/pinned', subPath: 'conf'},
            ],
          }),
        ],
        {
          volumes: [
            {name: 'cfg', configMap: {name: 'app-config'}},
            {name: 'sec', secret: {secretName: 'app-secret'}},
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
        },
      ),
    )
    const last = (f: string) => readSeen(file)?.seen[f]?.at(-1)
    const sees = (f: string, v: string) =>
      waitFor(
        () => last(f) === v,
        () => `${f} reading ${v.slice(0, 20)} (last: ${last(f)?.slice(0, 30)})`,
        DefaultVolumeResyncMs,
        100,
      )
    await sees('cfg/conf', 'c1')
    await sees('pinned', 'c1')
    await sees('sec/pass', 's1')
    // One watch for the ConfigMap, one for the Secret. (Server-side apply: the content is too large for the last-applied annotation.)
    expect((await stats(p)).openWatches).toBe(5)

    for (const doc of [cm('c2'), secret('s2')]) expect((await kubectl(['apply', '--server-side', '-f', '-'], doc)).exitCode).toBe(0)
    expect((await kubectl(['label', 'pod', 'app', '-n', ns, 'stage=two'])).exitCode).toBe(0)
    expect((await kubectl(['annotate', 'pod', 'app', '-n', ns, 'note=hello'])).exitCode).toBe(0)
    await sees('cfg/conf', 'c2')
    await sees('sec/pass', 's2')
    await sees('info/labels', 'stage="two"')
    // The API server may add annotations of its own: ours is among them.
    await waitFor(
      () => last('info/annotations')?.split('\n').includes('note="hello"'),
      () => `annotations with note="hello" (last: ${last('info/annotations')})`,
      DefaultVolumeResyncMs,
      100,
    )
    const s = readSeen(file)!
    expect(s.seen['cfg/conf']).toEqual(['c1', 'c2'])
    expect(s.seen['sec/pass']).toEqual(['s1', 's2'])
    // A subPath keeps what it had when the container started (in a sandbox: the bind mount; without: a pin).
    expect(s.seen['pinned']).toEqual(['c1'])

    expect((await kubectl(['delete', 'pod', 'app', '-n', ns, '--wait=true'])).exitCode).toBe(0)
    await podsGone()
    await waitFor(async () => (await stats(p)).openWatches === 3, 'watches back to node, pods and services', 10_000, 200)
  }, 120_000)

  test('a 100-pod burst referencing one ConfigMap (volume and env) costs one list and one watch of it, not a read per pod', async () => {
    expect(await kubectl(['apply', '-f', '-'], yaml({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'shared', namespace: ns}, data: {k: 'v'}}))).toMatchObject({exitCode: 0})
    const before = await stats(p)
    const count = (s: Stats, k: string) => s.byResource[k] ?? 0
    const Burst = 100
    const names = Array.from({length: Burst}, (_, i) => `burst-${i}`)
    await pool(names, 16, async (name) => {
      await createPod(
        c.core,
        podOn(
          node,
          ns,
          name,
          [{name: 'app', image: 'busybox', command: ['sleep', '3600'], env: [{name: 'K', valueFrom: {configMapKeyRef: {name: 'shared', key: 'k'}}}], volumeMounts: [{name: 'c', mountPath: '/c'}]}],
          {
            terminationGracePeriodSeconds: 0,
            volumes: [{name: 'c', configMap: {name: 'shared'}}],
          },
        ),
      )
    })
    await waitFor(
      async () => (await c.core.listNamespacedPod({namespace: ns})).items.filter((x) => x.metadata!.name!.startsWith('burst-') && x.status?.containerStatuses?.[0]?.state?.running).length === Burst,
      'the burst running',
      180_000,
      1000,
    )
    const during = await stats(p)
    expect(count(during, 'GET configmaps') - count(before, 'GET configmaps')).toBe(1)
    expect(count(during, 'WATCH configmaps') - count(before, 'WATCH configmaps')).toBe(1)
    expect(during.openWatches).toBe(4)
    expect((await kubectl(['delete', 'pods', '--all', '-n', ns, '--wait=false'])).exitCode).toBe(0)
    await podsGone()
    await waitFor(async () => (await stats(p)).openWatches === 3, 'watches back to node, pods and services', 10_000, 200)
  }, 300_000)
})
