import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync} from 'node:fs'
import {join} from 'node:path'
import {Emulator} from '../../src/emulator/emulator.js'
import {TestProvider} from '../support/test-provider.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, runDir, uniqueName, waitFor} from './helpers.js'

describeE2e('pod lifecycle through the real API server (test provider)', () => {
  let c: Clients
  let emulator: Emulator
  let provider: TestProvider
  const nodeName = uniqueName('podsnode')
  const ns = uniqueName('pods')
  const feed: {pods: V1Pod[]; removed: string[]} = {pods: [], removed: []}

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    const stateDir = join(runDir(), 'nodes', nodeName)
    mkdirSync(stateDir, {recursive: true})
    emulator = new Emulator({
      name: nodeName,
      kubeconfig: kubeconfigPath(),
      stateDir,
      port: 0,
      cpu: '2',
      provider: () => (provider = new TestProvider()),
    })
    emulator.on('pod', (p) => feed.pods.push(p))
    emulator.on('podRemoved', (uid) => feed.removed.push(uid))
    await emulator.start()
  })

  afterAll(async () => {
    await emulator?.stop({rm: true})
    await deleteNamespace(c?.core, ns)
  })

  function podSpec(name: string, env: Record<string, string> = {}, extra: Partial<V1Pod['spec']> = {}): V1Pod {
    return {
      metadata: {name, labels: {app: name}},
      spec: {
        nodeName,
        terminationGracePeriodSeconds: 30,
        containers: [{name: 'app', image: 'busybox', env: Object.entries(env).map(([k, value]) => ({name: k, value}))}],
        ...extra,
      },
    }
  }

  const read = (name: string) => c.core.readNamespacedPod({name, namespace: ns})
  const create = (p: V1Pod) => c.core.createNamespacedPod({namespace: ns, body: p})
  const running = (name: string) => waitFor(async () => ((await read(name)).status?.phase === 'Running' ? read(name) : undefined), `${name} Running`, 20_000, 100)
  const gone = (name: string, timeoutMs = 20_000) =>
    waitFor(
      async () => {
        try {
          await read(name)
          return false
        } catch (error) {
          return (error as {code?: number}).code === 404
        }
      },
      `${name} gone`,
      timeoutMs,
      50,
    )

  test('a pod bound to the node runs: status fields and conditions as kubectl shows them, one status write, and the pod feed', async () => {
    const patchesBefore = emulator.summary().byResource['PATCH pods/status'] ?? 0
    const writesBefore = emulator.podStatusWrites
    const created = await create(podSpec('web'))
    const pod = await running('web')
    // A moment for any further write to land before counting.
    await new Promise((r) => setTimeout(r, 500))
    expect(emulator.podStatusWrites - writesBefore).toBe(1)
    expect((emulator.summary().byResource['PATCH pods/status'] ?? 0) - patchesBefore).toBe(1)

    const s = pod.status!
    const nodeIP = (await c.core.readNode({name: nodeName})).status!.addresses!.find((a) => a.type === 'InternalIP')!.address
    expect(s.hostIP).toBe(nodeIP)
    expect(s.podIP).toBe(nodeIP)
    expect(s.podIPs).toEqual([{ip: nodeIP}])
    expect(s.startTime).toBeDefined()
    expect(s.conditions!.map((x) => [x.type, x.status])).toEqual(
      expect.arrayContaining([
        ['PodReadyToStartContainers', 'True'],
        ['Initialized', 'True'],
        ['Ready', 'True'],
        ['ContainersReady', 'True'],
        ['PodScheduled', 'True'],
      ]),
    )
    expect(s.containerStatuses![0]).toMatchObject({name: 'app', ready: true, started: true, restartCount: 0, image: 'busybox'})
    expect(s.containerStatuses![0].state!.running).toBeDefined()

    const get = await kubectl(['get', 'pod', 'web', '-n', ns, '-o', 'wide', '--no-headers'])
    expect(get.stdout).toMatch(new RegExp(`^web\\s+1/1\\s+Running\\s+0\\s+\\S+\\s+${nodeIP.replaceAll('.', '\\.')}\\s+${nodeName}\\s`))

    const fed = emulator.pods().find((p) => p.metadata?.uid === created.metadata!.uid)
    expect(fed?.status?.phase).toBe('Running')
    expect(feed.pods.some((p) => p.metadata?.uid === created.metadata!.uid && p.status?.phase === 'Running')).toBe(true)

    await c.core.deleteNamespacedPod({name: 'web', namespace: ns})
    await gone('web')
    await waitFor(() => feed.removed.includes(created.metadata!.uid!), 'podRemoved in the feed', 5_000, 50)
  })

  test('graceful delete: a container that exits 1 s after SIGTERM is gone about 1 s later, not after the 30 s grace', async () => {
    await create(podSpec('slow-exit', {TEST_TERM_EXIT_MS: '1000'}))
    await running('slow-exit')
    const started = Date.now()
    await c.core.deleteNamespacedPod({name: 'slow-exit', namespace: ns})
    // Terminating while the process runs: kubectl shows it.
    const during = await kubectl(['get', 'pod', 'slow-exit', '-n', ns, '--no-headers'])
    expect(during.stdout).toMatch(/Terminating/)
    await gone('slow-exit', 10_000)
    const took = Date.now() - started
    expect(took).toBeGreaterThanOrEqual(900)
    expect(took).toBeLessThan(4_000)
    expect(provider.calls.find((x) => x.op === 'delete' && x.name === 'slow-exit')?.grace).toBe(30)
  })

  test('a second delete with a shorter grace shortens the running termination', async () => {
    await create(podSpec('stubborn', {TEST_IGNORE_TERM: '1'}))
    await running('stubborn')
    await c.core.deleteNamespacedPod({name: 'stubborn', namespace: ns})
    await waitFor(() => provider.calls.some((x) => x.op === 'delete' && x.name === 'stubborn'), 'the first kill', 5_000, 50)
    const second = Date.now()
    await c.core.deleteNamespacedPod({name: 'stubborn', namespace: ns, gracePeriodSeconds: 2})
    await gone('stubborn', 10_000)
    expect(Date.now() - second).toBeLessThan(5_000)
    expect(provider.calls.filter((x) => x.op === 'delete' && x.name === 'stubborn').map((x) => x.grace)).toEqual([30, 2])
  })

  test("a graceful delete bumps the generation and the terminating pod's status says it at once, as the kubelet writes it", async () => {
    await create(podSpec('gen-delete', {TEST_IGNORE_TERM: '1'}))
    const before = await running('gen-delete')
    const g1 = before.metadata!.generation!
    expect(before.status?.observedGeneration).toBe(g1)
    await c.core.deleteNamespacedPod({name: 'gen-delete', namespace: ns})
    const terminating = await waitFor(
      async () => {
        const p = await read('gen-delete')
        return p.metadata!.generation! > g1 && p.status?.observedGeneration === p.metadata!.generation ? p : undefined
      },
      'observedGeneration of the delete',
      10_000,
      100,
    )
    expect(terminating.status!.conditions!.every((x) => x.observedGeneration === terminating.metadata!.generation)).toBe(true)
    await c.core.deleteNamespacedPod({name: 'gen-delete', namespace: ns, gracePeriodSeconds: 1})
    await gone('gen-delete', 10_000)
  })

  test('force delete: the object is gone at once and the provider still kills the processes', async () => {
    const created = await create(podSpec('forced', {TEST_IGNORE_TERM: '1'}))
    await running('forced')
    const r = await kubectl(['delete', 'pod', 'forced', '-n', ns, '--grace-period=0', '--force'])
    expect(r.exitCode).toBe(0)
    await gone('forced', 3_000)
    await waitFor(() => provider.calls.some((x) => x.op === 'cleanup' && x.uid === created.metadata!.uid), 'the kill and cleanup', 10_000, 50)
    const kill = provider.calls.find((x) => x.op === 'delete' && x.uid === created.metadata!.uid)
    expect(kill?.grace).toBe(1)
    expect(await provider.getPod(ns, 'forced')).toBeUndefined()
  })

  test('a label edited while the pod runs survives the status writes that follow', async () => {
    // The container exits on its own after 1.5 s: that forces a status write after the label edit.
    await create(podSpec('labelled', {TEST_RUN_MS: '1500', TEST_EXIT_CODE: '3'}))
    await running('labelled')
    await c.core.patchNamespacedPod({name: 'labelled', namespace: ns, body: {metadata: {labels: {edited: 'by-hand'}}}}, c.lib.setHeaderOptions('Content-Type', c.lib.PatchStrategy.MergePatch))
    const after = await waitFor(
      async () => {
        const p = await read('labelled')
        return p.status?.containerStatuses?.[0]?.state?.terminated ? p : undefined
      },
      'the exit reported',
      10_000,
      100,
    )
    expect(after.metadata?.labels).toEqual({app: 'labelled', edited: 'by-hand'})
    expect(after.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(3)
    await c.core.deleteNamespacedPod({name: 'labelled', namespace: ns})
    await gone('labelled')
  })

  test("a 50-pod create/delete round: each pod goes with its terminal status and the delete's generation written, and the status map is empty again", async () => {
    const names = Array.from({length: 50}, (_, i) => `round-${i}`)
    for (const n of names) await create(podSpec(n))
    await waitFor(
      async () => {
        const list = await c.core.listNamespacedPod({namespace: ns})
        return list.items.filter((p) => p.metadata!.name!.startsWith('round-') && p.status?.phase === 'Running').length === 50
      },
      '50 pods Running',
      60_000,
      250,
    )
    // What each pod showed last before it was gone: the writes of a delete burst, queued behind each other, are
    // built when their turn comes, and none may leave a pod to go without its terminal status.
    const last = new Map<string, V1Pod>()
    const goneSeen = new Set<string>()
    const watch = await new c.lib.Watch(c.kc).watch(
      `/api/v1/namespaces/${ns}/pods`,
      {},
      (type: string, p: V1Pod) => (type === 'DELETED' ? goneSeen.add(p.metadata!.name!) : last.set(p.metadata!.name!, p)),
      () => undefined,
    )
    const before = emulator.summary().byResource
    await c.core.deleteCollectionNamespacedPod({namespace: ns})
    await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, 'all pods gone', 60_000, 250)
    await waitFor(
      () => goneSeen.size === 50,
      () => `50 deletions watched (${goneSeen.size})`,
      10_000,
      50,
    )
    watch.abort()
    for (const n of names) {
      const p = last.get(n)!
      expect([n, p.status?.phase]).toEqual([n, expect.stringMatching(/^(Succeeded|Failed)$/)])
      expect([n, p.status?.observedGeneration]).toEqual([n, p.metadata!.generation])
      expect([n, p.status?.containerStatuses?.[0].state?.terminated]).toEqual([n, expect.anything()])
    }
    const after = emulator.summary().byResource
    const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0)
    expect(delta('DELETE pods')).toBe(50)
    // The delete's generation and the terminal status: two writes at most, one where the first waited its turn.
    expect(delta('PATCH pods/status')).toBeLessThanOrEqual(100)
    await waitFor(
      () => emulator.pods().length === 0,
      () => `the status map to empty (${emulator.pods().length} left)`,
      10_000,
      50,
    )
    expect(provider.size).toBe(0)
    expect(provider.timers).toBe(0)
  })

  test('admission rejection: the reason shows in kubectl get pod, with a Warning event', async () => {
    await create(podSpec('too-big', {}, {containers: [{name: 'app', image: 'busybox', resources: {requests: {cpu: '4'}}}]}))
    const pod = await waitFor(
      async () => {
        const p = await read('too-big')
        return p.status?.phase === 'Failed' ? p : undefined
      },
      'the rejection',
      10_000,
      100,
    )
    expect(pod.status).toMatchObject({reason: 'OutOfcpu', message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000"})
    const get = await kubectl(['get', 'pod', 'too-big', '-n', ns, '--no-headers'])
    expect(get.stdout).toMatch(/^too-big\s+0\/1\s+OutOfcpu\s+0\s/)
    const events = await waitFor(
      async () => {
        const list = await c.core.listNamespacedEvent({namespace: ns, fieldSelector: 'involvedObject.name=too-big'})
        return list.items.find((e) => e.reason === 'OutOfcpu')
      },
      'the Warning event',
      10_000,
      200,
    )
    expect(events.type).toBe('Warning')
    expect(events.source).toMatchObject({host: nodeName})
    expect(provider.calls.some((x) => x.name === 'too-big')).toBe(false)
    await c.core.deleteNamespacedPod({name: 'too-big', namespace: ns})
    await gone('too-big')
  })
})
