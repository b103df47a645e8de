import {afterAll, beforeAll, expect, test} from '@jest/globals'
import * as k8s from '@kubernetes/client-node'
import {execa, type ResultPromise} from 'execa'
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {cliPath} from './env.mjs'
import {containerStatus, createPod, eventsOnceSeen, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'
import {createNamespace, describeE2e, processesMatching, runDir, startVnode, stopAllVnodes, testEnv, uniqueName, vnode, waitFor} from './helpers.js'
import {TcpProxy} from './tcp-proxy.js'

/**
 * etcd is compacted this often. With the watch cache off, a watch from a
 * compacted version is answered 410 Gone (the cache would replay it instead),
 * so a version from before the cut expires a few seconds after it.
 */
const CompactionInterval = '3s'

/** Does the server answer a watch from this version with 410 Gone (an ERROR event with code 410, or HTTP 410)? */
function answersGone(kc: k8s.KubeConfig, path: string, resourceVersion: string): Promise<boolean> {
  return new Promise((resolve) => {
    let verdict: boolean | undefined
    let controller: AbortController | undefined
    const settle = (gone: boolean) => {
      if (verdict !== undefined) return
      verdict = gone
      clearTimeout(timer)
      controller?.abort()
      resolve(gone)
    }
    // No answer at all: nothing happened since that version, which is not expired either.
    const timer = setTimeout(() => settle(false), 3000)
    void new k8s.Watch(kc)
      .watch(
        path,
        {resourceVersion, timeoutSeconds: 2},
        (type: string, obj: {code?: number}) => settle(type === 'ERROR' && obj?.code === 410),
        (err: unknown) => settle((err as {statusCode?: number})?.statusCode === 410),
      )
      .then((c) => {
        controller = c
        if (verdict !== undefined) c.abort()
      })
  })
}

/** The pods `kubectl vnode pods -w -o json` printed: one pretty-printed object after another. */
function printedPods(text: string): k8s.V1Pod[] {
  return text
    .split(/^}$/m)
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => JSON.parse(`${s}\n}`) as k8s.V1Pod)
}

const running = (p: k8s.V1Pod | undefined) => !!containerStatus(p, 'app')?.state?.running

describeE2e('410 Gone: the pod source, the node watcher and pods -w relist after their resourceVersion is compacted away', () => {
  const dir = join(runDir(), 'gone-cluster')
  const kubeconfig = join(dir, 'kubeconfig')
  const proxiedKubeconfig = join(dir, 'kubeconfig-proxied')
  let kc: k8s.KubeConfig
  let core: k8s.CoreV1Api
  let proxy: TcpProxy
  let watcher: ResultPromise | undefined
  const ns = uniqueName('gone')
  const node = uniqueName('gone')
  const tag = uniqueName('gonemark')
  const mark = (pod: string) => `${tag}-${pod}`

  beforeAll(async () => {
    const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0', '--apiserver-arg=--watch-cache=false', `--apiserver-arg=--etcd-compaction-interval=${CompactionInterval}`], {
      timeout: 120_000,
    })
    expect(up.exitCode).toBe(0)
    kc = new k8s.KubeConfig()
    kc.loadFromFile(kubeconfig)
    core = kc.makeApiClient(k8s.CoreV1Api)
    // vnode and pods -w reach the API server only through the proxy; the test talks to it directly.
    const server = new URL(kc.getCurrentCluster()!.server)
    proxy = new TcpProxy(server.hostname, Number(server.port))
    await proxy.start()
    const text = readFileSync(kubeconfig, 'utf8')
    writeFileSync(proxiedKubeconfig, text.replace(`server: ${server.origin}`, `server: https://127.0.0.1:${proxy.port}`), {mode: 0o600})
    await createNamespace(core, ns)
  }, 120_000)

  afterAll(async () => {
    if (watcher) {
      watcher.kill('SIGKILL')
      await watcher
    }
    await proxy?.restore()
    await stopAllVnodes()
    await proxy?.close()
    await vnode(['cluster', 'down', '--dir', dir])
  })

  test('deleted, force-deleted and created pods and a node change made while vnode was cut off are caught up by relisting; nothing else restarts or is printed again', async () => {
    const p = startVnode(node, ['--kubeconfig', proxiedKubeconfig, '--no-default-taint'])
    await p.ready()
    const sleeper = (name: string) => podOn(node, ns, name, [nodeContainer('app', `/*${mark(name)}*/setInterval(()=>{},1000)`)])
    for (const name of ['steady', 'victim', 'doomed']) await createPod(core, sleeper(name))
    for (const name of ['steady', 'victim', 'doomed']) await waitPod(core, ns, name, running, 'running')
    const pids = Object.fromEntries(await Promise.all(['steady', 'victim', 'doomed'].map(async (n) => [n, await processesMatching(mark(n))] as const)))
    for (const n of ['steady', 'victim', 'doomed']) expect(pids[n]).toHaveLength(1)

    let out = ''
    let err = ''
    watcher = execa(cliPath(), ['pods', '-n', ns, '-w', '-o', 'json', '--kubeconfig', proxiedKubeconfig], {env: testEnv(), reject: false, buffer: false})
    watcher.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    watcher.stderr!.on('data', (d: Buffer) => (err += d.toString()))
    const lastPrinted = (name: string) =>
      printedPods(out)
        .filter((x) => x.metadata?.name === name)
        .pop()
    await waitFor(
      () => ['steady', 'victim', 'doomed'].every((n) => running(lastPrinted(n))),
      () => `pods -w printing the running pods (stdout ${out.slice(-300)}, stderr ${err})`,
      20_000,
      100,
    )

    // vnode's summary on SIGUSR2: the stats line after the ones already printed.
    const stats = async () => {
      const statsLines = () => p.lines.filter((l) => l.kind === 'stats')
      const before = statsLines().length
      p.child.kill('SIGUSR2')
      await waitFor(() => statsLines().length > before, 'a stats line', 10_000, 50)
      return statsLines()[before].summary as {openWatches: number; byResource: Record<string, number>}
    }
    const baseline = await stats()
    // node, pods and services
    expect(baseline.openWatches).toBe(3)
    expect(baseline.byResource['GET pods']).toBe(1)
    expect(baseline.byResource['GET services']).toBe(1)
    const steadyVersion = (await readPod(core, ns, 'steady'))!.metadata!.resourceVersion
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'tick'}, data: {n: '0'}}})
    const tick = async (n: number) => (await core.replaceNamespacedConfigMap({name: 'tick', namespace: ns, body: {metadata: {name: 'tick'}, data: {n: String(n)}}})).metadata!.resourceVersion!

    await proxy.cut()
    // Taken after the cut: nothing reaches vnode or pods -w any more, so every version they hold is at most this one.
    const cutVersion = await tick(1)

    // While cut off: a graceful delete (vnode can learn its deletionTimestamp only by relisting), a force delete
    // (the object is gone: only the relist shows vnode an orphaned process), a new pod, and the node
    // marked Unknown as the node lifecycle controller would (only the node watcher makes vnode correct it).
    await core.deleteNamespacedPod({name: 'victim', namespace: ns})
    await core.deleteNamespacedPod({name: 'doomed', namespace: ns, gracePeriodSeconds: 0})
    await createPod(core, sleeper('born'))
    await core.patchNodeStatus(
      {name: node, body: {status: {conditions: [{type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown', message: 'changed while vnode was cut off'}]}}},
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
    )
    expect((await readPod(core, ns, 'victim'))?.metadata?.deletionTimestamp).toBeTruthy()
    expect(await readPod(core, ns, 'doomed')).toBeUndefined()

    // Enough writes that compaction passes the cut, proven by our own watch from the cut's version.
    let n = 2
    for (; n < 30; n++) await tick(n)
    await waitFor(
      async () => {
        for (let i = 0; i < 5; i++) await tick(n++)
        return answersGone(kc, `/api/v1/namespaces/${ns}/configmaps`, cutVersion)
      },
      `a watch from resourceVersion ${cutVersion} answered 410 Gone`,
      30_000,
      500,
    )
    expect(p.child.exitCode).toBeNull()

    const outAtRestore = out.length
    const printedBefore = new Set(printedPods(out).map((x) => `${x.metadata?.uid}@${x.metadata?.resourceVersion}`))
    await proxy.restore()
    const restoredAt = Date.now()

    // The node watcher relearned the node and vnode wrote its own Ready back.
    await waitFor(async () => (await core.readNode({name: node})).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 'Ready=True again from vnode', 30_000, 250)
    // The force-deleted pod's process is an orphan vnode finds in the relist.
    await waitFor(async () => (await processesMatching(mark('doomed'))).length === 0, 'the force-deleted pod killed', 30_000, 250)
    // The gracefully deleted pod is terminated and its object removed by vnode.
    await waitFor(async () => !(await readPod(core, ns, 'victim')), 'the gracefully deleted pod gone from the API', 30_000, 250)
    expect(await processesMatching(mark('victim'))).toEqual([])
    const born = await waitPod(core, ns, 'born', running, 'running', 30_000)
    expect(containerStatus(born, 'app')!.restartCount).toBe(0)
    expect(await processesMatching(mark('born'))).toHaveLength(1)

    // Untouched: same process, no restart, one Started, no Killing.
    const steady = (await readPod(core, ns, 'steady'))!
    expect(containerStatus(steady, 'app')!.restartCount).toBe(0)
    expect(await processesMatching(mark('steady'))).toEqual(pids.steady)
    const events = await eventsOnceSeen(core, ns, 'born', 'Started')
    const count = (pod: string, reason: string) => events.filter((e) => e.involvedObject.name === pod && e.reason === reason).reduce((s, e) => s + (e.count ?? 1), 0)
    expect(count('steady', 'Started')).toBe(1)
    expect(count('steady', 'Killing')).toBe(0)
    expect(count('born', 'Started')).toBe(1)

    // vnode relisted its pods and services, and its watches are back to node, pods and services, not piled up.
    const after = await stats()
    expect(after.byResource['GET pods']).toBeGreaterThanOrEqual(2)
    await waitFor(async () => ((await stats()).byResource['GET services'] ?? 0) >= 2, 'the services relisted', 20_000, 500)
    expect((await stats()).openWatches).toBe(3)

    // pods -w: the new pod and both deletions, and nothing it had printed already.
    await waitFor(
      () =>
        running(
          printedPods(out.slice(outAtRestore))
            .filter((x) => x.metadata?.name === 'born')
            .pop(),
        ),
      'pods -w printing born running',
      20_000,
      100,
    )
    const printedAfter = printedPods(out.slice(outAtRestore))
    const shownDeleted = (name: string) => printedAfter.some((x) => x.metadata?.name === name && !!x.metadata?.deletionTimestamp)
    expect({
      doomedShownDeleted: shownDeleted('doomed'),
      victimShownDeleted: shownDeleted('victim'),
      // A pod gone in the gap is shown deleted from its last known state; any other row must be news.
      printedAgain: printedAfter.filter((x) => !x.metadata?.deletionTimestamp && printedBefore.has(`${x.metadata?.uid}@${x.metadata?.resourceVersion}`)).map((x) => x.metadata?.name),
      // steady did not change (same resourceVersion): nothing to print for it.
      steadyPrinted: steady.metadata?.resourceVersion === steadyVersion ? printedAfter.filter((x) => x.metadata?.name === 'steady').length : 0,
    }).toEqual({doomedShownDeleted: true, victimShownDeleted: true, printedAgain: [], steadyPrinted: 0})

    // Settled, nobody spins: pods -w prints no more errors, and the proxy sees only vnode's idle traffic
    // (a lease renewal every 10 s). A loop re-opening a watch every half second would show here.
    await new Promise((r) => setTimeout(r, Math.max(0, restoredAt + 15_000 - Date.now())))
    const errAt = err.length
    const acceptedAt = proxy.accepted
    await new Promise((r) => setTimeout(r, 6_000))
    expect(err.slice(errAt)).toBe('')
    expect(proxy.accepted - acceptedAt).toBeLessThanOrEqual(4)
    expect(watcher.exitCode).toBeNull()

    watcher.kill('SIGINT')
    expect((await watcher).exitCode).toBe(0)
    watcher = undefined
    expect(await p.stop()).toBe(0)
    for (const name of ['steady', 'born', 'victim', 'doomed']) expect(await processesMatching(mark(name))).toEqual([])
  }, 120_000)

  test('a ConfigMap watch that ends with 410 Gone relists: the change made while cut off reaches the mounted volume, the pod keeps running', async () => {
    const node2 = uniqueName('gonecm')
    const p = startVnode(node2, ['--kubeconfig', proxiedKubeconfig, '--no-default-taint'])
    await p.ready()
    const stats = async () => {
      const statsLines = () => p.lines.filter((l) => l.kind === 'stats')
      const before = statsLines().length
      p.child.kill('SIGUSR2')
      await waitFor(() => statsLines().length > before, 'a stats line', 10_000, 50)
      return statsLines()[before].summary as {openWatches: number; byResource: Record<string, number>}
    }
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'mounted'}, data: {v: 'before'}}})
    const file = join(dir, 'mounted-seen')
    const reader = `const fs=require('fs');setInterval(()=>{try{fs.writeFileSync('${file}.tmp',fs.readFileSync(process.env.VNODE_VOLUME_ROOT+'/cfg/v'));fs.renameSync('${file}.tmp','${file}')}catch{}},100)`
    await createPod(core, podOn(node2, ns, 'mounter', [nodeContainer('app', reader, {volumeMounts: [{name: 'cfg', mountPath: '/cfg'}]})], {volumes: [{name: 'cfg', configMap: {name: 'mounted'}}]}))
    await waitPod(core, ns, 'mounter', running, 'running')
    const seen = () => (existsSync(file) ? readFileSync(file, 'utf8') : undefined)
    await waitFor(() => seen() === 'before', 'the volume read', 20_000, 100)
    // node, pods, services and the ConfigMap
    expect((await stats()).openWatches).toBe(4)
    const listsBefore = (await stats()).byResource['GET configmaps'] ?? 0

    await proxy.cut()
    const cutVersion = (await core.replaceNamespacedConfigMap({name: 'mounted', namespace: ns, body: {metadata: {name: 'mounted'}, data: {v: 'after'}}})).metadata!.resourceVersion!
    let n = 100
    await waitFor(
      async () => {
        for (let i = 0; i < 5; i++) await core.replaceNamespacedConfigMap({name: 'tick', namespace: ns, body: {metadata: {name: 'tick'}, data: {n: String(n++)}}})
        return answersGone(kc, `/api/v1/namespaces/${ns}/configmaps`, cutVersion)
      },
      `a watch from resourceVersion ${cutVersion} answered 410 Gone`,
      30_000,
      500,
    )
    await proxy.restore()
    // The watch resumed from a compacted version, was told 410, relisted, and the volume was written.
    await waitFor(
      () => seen() === 'after',
      () => `the change in the volume (seen: ${seen()})`,
      60_000,
      200,
    )
    expect(((await stats()).byResource['GET configmaps'] ?? 0) - listsBefore).toBeGreaterThanOrEqual(1)
    expect((await stats()).openWatches).toBe(4)
    const pod = (await readPod(core, ns, 'mounter'))!
    expect(running(pod)).toBe(true)
    expect(containerStatus(pod, 'app')!.restartCount).toBe(0)
    await core.deleteNamespacedPod({name: 'mounter', namespace: ns})
    await waitFor(async () => !(await readPod(core, ns, 'mounter')), 'the pod gone', 30_000, 250)
    await waitFor(async () => (await stats()).openWatches === 3, 'watches back to node, pods and services', 10_000, 200)
    expect(await p.stop()).toBe(0)
  }, 120_000)
})
