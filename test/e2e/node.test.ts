import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Node} from '@kubernetes/client-node'
import {EventRecorder} from '../../src/emulator/kube/events.js'
import {NodeController} from '../../src/emulator/node/node-controller.js'
import {parseQuantity} from '../../src/emulator/quantity.js'
import {type Clients, clients, describeE2e, kubectl, runDir, startVnode, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

const condition = (n: V1Node | undefined, type: string) => n?.status?.conditions?.find((c) => c.type === type)

describeE2e('node emulator: registration, heartbeat, status, exit', () => {
  let c: Clients
  const readNode = (name: string) => c.core.readNode({name})
  beforeAll(async () => {
    c = await clients()
  })
  afterAll(async () => {
    await stopAllVnodes()
  })

  test('registers with the labels, taint, providerID, capacity and nodeInfo a kubelet would, Ready within 2 s', async () => {
    const name = uniqueName('reg')
    const spawned = Date.now()
    const p = startVnode(name, ['--label', 'team=web', '--taint', 'dedicated=dev:NoExecute', '--cpu', '3', '--memory', '4Gi', '--pods', '20'])
    const node = await waitFor(
      async () => {
        const n = await readNode(name).catch(() => undefined)
        return condition(n, 'Ready')?.status === 'True' ? n : undefined
      },
      'node Ready',
      15_000,
      25,
    )
    const readyAt = Date.now()
    // From the moment vnode reached the API server to a Ready node: what vnode
    // itself controls. Process start-up (loading Node.js modules) comes before
    // it and varies with machine load; the whole span is reported, and bounded loosely.
    const connected = Date.parse((await p.waitForLine((l) => l.kind === 'step' && l.step === 'connect', 'connect step')).time)
    process.stdout.write(`spawn to Ready: ${readyAt - spawned} ms; connected to Ready: ${readyAt - connected} ms\n`)
    expect(readyAt - connected).toBeLessThan(2_000)
    expect(readyAt - spawned).toBeLessThan(15_000)
    expect(node.metadata?.labels).toMatchObject({
      type: 'virtual-kubelet',
      'kubernetes.io/role': 'agent',
      'kubernetes.io/hostname': name,
      'kubernetes.io/os': 'linux',
      'vnode.dev/node': 'true',
      team: 'web',
    })
    expect(node.spec?.providerID).toBe(`vnode://${name}`)
    expect(node.spec?.taints).toEqual(
      expect.arrayContaining([
        {key: 'virtual-kubelet.io/provider', value: 'vnode', effect: 'NoSchedule'},
        {key: 'dedicated', value: 'dev', effect: 'NoExecute'},
      ]),
    )
    expect(node.status?.capacity).toMatchObject({cpu: '3', pods: '20'})
    expect(parseQuantity(node.status!.capacity!.memory)).toBe(4 * 2 ** 30)
    // allocatable = capacity - the kubelet's hard eviction threshold for memory (100Mi)
    expect(parseQuantity(node.status!.allocatable!.memory)).toBe(4 * 2 ** 30 - 100 * 2 ** 20)
    expect(node.status?.nodeInfo?.kubeletVersion).toMatch(/^v1\.\d+\.\d+-vnode\./)
    expect(node.status?.nodeInfo?.bootID).toMatch(/^[0-9a-f-]{36}$/)
    const internal = node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address
    expect(internal).toBeDefined()
    expect(internal).not.toMatch(/^127\./)
    // The IP only: no Hostname address, which the API server would dial first.
    expect(node.status?.addresses).toEqual([{type: 'InternalIP', address: internal}])
    expect(node.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBeGreaterThan(0)
    for (const type of ['MemoryPressure', 'DiskPressure', 'PIDPressure']) expect(condition(node, type)?.status).toBe('False')
    expect(condition(node, 'Ready')).toMatchObject({reason: 'KubeletReady', message: 'kubelet is posting ready status'})
    const events = await waitFor(
      async () => {
        const list = await c.core.listNamespacedEvent({namespace: 'default', fieldSelector: `involvedObject.name=${name}`})
        const reasons = list.items.map((e) => e.reason)
        return ['Starting', 'NodeReady', 'NodeHasSufficientMemory', 'NodeHasNoDiskPressure', 'NodeHasSufficientPID'].every((r) => reasons.includes(r)) ? reasons : undefined
      },
      'node events',
      10_000,
    )
    expect(events).toContain('NodeReady')
    expect(await p.stop()).toBe(0)
  })

  test('--node-ip is the InternalIP, the only address, and in the serving certificate', async () => {
    const name = uniqueName('nodeip')
    // An address nothing dials here: --relay off, so up does not ask the API server to reach it.
    const p = startVnode(name, ['--node-ip', '192.0.2.77', '--relay', 'off'])
    await p.ready()
    expect((await readNode(name)).status?.addresses).toEqual([{type: 'InternalIP', address: '192.0.2.77'}])
    expect((await p.waitForLine((l) => l.step === 'cert', 'the serving certificate line')).message).toMatch(/^serving certificate: issued by the cluster .* for .*192\.0\.2\.77/)
    expect(await p.stop()).toBe(0)
    await c.core.deleteNode({name}).catch(() => undefined)
  })

  test('out-of-band conditions and labels survive vnode status writes and a restart (three-way merge)', async () => {
    const name = uniqueName('merge')
    let p = startVnode(name)
    await p.ready()
    const patch = await kubectl([
      'patch',
      'node',
      name,
      '--subresource=status',
      '--type=strategic',
      '-p',
      JSON.stringify({status: {conditions: [{type: 'KernelDeadlock', status: 'False', reason: 'KernelHasNoDeadlock', message: 'kernel has no deadlock'}]}}),
    ])
    expect(patch.exitCode).toBe(0)
    expect((await kubectl(['label', 'node', name, 'owner=ops'])).exitCode).toBe(0)
    expect(await p.stop()).toBe(0)
    // A restart adopts the node and writes its status again (forced first write).
    p = startVnode(name)
    await p.ready()
    const node = await waitFor(
      async () => {
        const n = await readNode(name)
        return condition(n, 'Ready')?.status === 'True' ? n : undefined
      },
      'node Ready again',
      15_000,
    )
    expect(condition(node, 'KernelDeadlock')).toMatchObject({status: 'False', reason: 'KernelHasNoDeadlock'})
    expect(node.metadata?.labels?.owner).toBe('ops')
    // vnode's own stash of what it applied does not claim the foreign condition.
    expect(node.metadata?.annotations?.['vnode.dev/last-applied-status']).not.toContain('KernelDeadlock')
    expect(node.spec?.unschedulable).toBeFalsy()
    expect(await p.stop()).toBe(0)
  })

  test('a node deleted with kubectl is re-registered within 10 s; two nodes run side by side', async () => {
    const a = uniqueName('twin-a')
    const b = uniqueName('twin-b')
    const pa = startVnode(a)
    const pb = startVnode(b)
    await Promise.all([pa.ready(), pb.ready()])
    const before = await readNode(a)
    // Timestamps have a second's resolution: the first Node's transitions must be seconds older than the second Node.
    await new Promise((r) => setTimeout(r, 2_100))
    const del = await kubectl(['delete', 'node', a, '--wait=false'])
    expect(del.exitCode).toBe(0)
    const deletedAt = Date.now()
    const again = await waitFor(
      async () => {
        const n = await readNode(a).catch(() => undefined)
        return n && n.metadata?.uid !== before.metadata?.uid && condition(n, 'Ready')?.status === 'True' ? n : undefined
      },
      're-registered node',
      15_000,
      100,
    )
    expect(Date.now() - deletedAt).toBeLessThan(10_000)
    expect(again.metadata?.labels?.['vnode.dev/node']).toBe('true')
    // A new Node has no conditions for the kubelet to carry over: each one's transition is the new Node's, never older.
    // Both times are whole seconds, set a moment apart (the node's clock, then the API server's): the transition may
    // read a second before the creation, never the 2 s and more of the deleted Node's.
    const created = new Date(again.metadata!.creationTimestamp!).getTime()
    expect(again.status?.conditions?.map((cond) => [cond.type, new Date(cond.lastTransitionTime!).getTime() >= created - 1_000])).toEqual([
      ['MemoryPressure', true],
      ['DiskPressure', true],
      ['PIDPressure', true],
      ['Ready', true],
    ])
    // The lease follows the new Node object.
    await waitFor(
      async () => {
        const l = await c.coordination.readNamespacedLease({name: a, namespace: 'kube-node-lease'})
        return l.metadata?.ownerReferences?.[0]?.uid === again.metadata?.uid
      },
      'lease owned by the new node',
      20_000,
      250,
    )
    expect(condition(await readNode(b), 'Ready')?.status).toBe('True')
    const leases = await c.coordination.listNamespacedLease({namespace: 'kube-node-lease'})
    expect(leases.items.map((l) => l.metadata?.name)).toEqual(expect.arrayContaining([a, b]))
    expect(await pa.stop()).toBe(0)
    expect(await pb.stop()).toBe(0)
  })

  test("a Node replaced under its name between two status writes gets transition times of its own, never the replaced one's", async () => {
    // The window of the re-registration race, held open: vnode wrote its conditions to one Node, and before its next
    // write the Node was deleted and created again under the same name (by vnode's own re-registration or anyone).
    const name = uniqueName('replaced')
    const controller = new NodeController(
      c.core,
      {name, nodeIP: '127.0.0.1', port: 10250, labels: {}, taints: [], pods: 10, kubeletVersion: 'v0.0.0', runtimeVersion: 'vnode://0'},
      new EventRecorder(c.core, name),
      {
        stateDir: runDir(),
        reregister: false,
      },
    )
    try {
      await controller.register()
      await controller.syncStatus(true)
      const first = await readNode(name)
      await new Promise((r) => setTimeout(r, 2_100))
      await c.core.deleteNode({name})
      const second = await c.core.createNode({body: {metadata: {name}}})
      expect(await controller.syncStatus(true)).toBe(true)
      const now = await readNode(name)
      expect(now.metadata?.uid).toBe(second.metadata?.uid)
      expect(now.metadata?.uid).not.toBe(first.metadata?.uid)
      const created = new Date(second.metadata!.creationTimestamp!).getTime()
      expect(now.status?.conditions?.map((cond) => [cond.type, new Date(cond.lastTransitionTime!).getTime() >= created - 1_000])).toEqual([
        ['MemoryPressure', true],
        ['DiskPressure', true],
        ['PIDPressure', true],
        ['Ready', true],
      ])
    } finally {
      await c.core.deleteNode({name}).catch(() => undefined)
    }
  })

  test('--nodes 3 runs three nodes in one process, each with its own lease, status and port', async () => {
    const name = uniqueName('fleet')
    const p = startVnode(name, ['--nodes', '3'])
    await p.waitForLine((l) => l.kind === 'step' && l.step === 'ready' && l.node === `${name}-2`, 'the third node ready', 30_000)
    await waitFor(() => p.lines.filter((l) => l.kind === 'step' && l.step === 'ready').length === 3, 'three ready nodes', 30_000)
    const names = [0, 1, 2].map((i) => `${name}-${i}`)
    const nodes = await Promise.all(names.map(readNode))
    for (const n of nodes) expect(condition(n, 'Ready')?.status).toBe('True')
    const ports = new Set(nodes.map((n) => n.status?.daemonEndpoints?.kubeletEndpoint?.Port))
    expect(ports.size).toBe(3)
    for (const n of names) expect((await c.coordination.readNamespacedLease({name: n, namespace: 'kube-node-lease'})).spec?.holderIdentity).toBe(n)
    expect(await p.stop()).toBe(0)
    for (const n of await Promise.all(names.map(readNode))) expect(condition(n, 'Ready')?.status).toBe('False')
  })

  test('with --no-reregister a node deleted out of band stays deleted', async () => {
    const name = uniqueName('noreg')
    const p = startVnode(name, ['--no-reregister'])
    await p.ready()
    expect((await kubectl(['delete', 'node', name])).exitCode).toBe(0)
    // Longer than the re-registration takes by default (well under 10 s), and past a lease renewal.
    await new Promise((r) => setTimeout(r, 12_000))
    await expect(readNode(name)).rejects.toMatchObject({code: 404})
    expect(p.child.exitCode).toBeNull()
    expect(await p.stop()).toBe(0)
  })

  test('paused past the grace the node lifecycle controller marks it Unknown; resumed it is Ready within 15 s; idle cost stays at or under 7 requests a minute', async () => {
    const paused = uniqueName('pause')
    const idle = uniqueName('idle')
    const pp = startVnode(paused)
    const pi = startVnode(idle)
    await Promise.all([pp.ready(), pi.ready()])
    process.kill(pp.pid, 'SIGSTOP')
    try {
      const unknown = await waitFor(
        async () => {
          const n = await readNode(paused)
          return condition(n, 'Ready')?.status === 'Unknown' ? n : undefined
        },
        'Ready=Unknown from the node lifecycle controller',
        45_000,
        500,
      )
      expect(condition(unknown, 'Ready')?.reason).toBe('NodeStatusUnknown')
      // The controller writes the condition and the taint in two updates (status, then spec):
      // wait for the taint as for the condition, with the node still paused.
      const tainted = await waitFor(
        async () => {
          const n = await readNode(paused)
          return n.spec?.taints?.some((t) => t.key === 'node.kubernetes.io/unreachable') ? n : undefined
        },
        'the node.kubernetes.io/unreachable taint from the node lifecycle controller',
        15_000,
        250,
      )
      expect(condition(tainted, 'Ready')?.status).toBe('Unknown')
    } finally {
      process.kill(pp.pid, 'SIGCONT')
    }
    const resumed = Date.now()
    await waitFor(async () => condition(await readNode(paused), 'Ready')?.status === 'True', 'Ready after SIGCONT', 15_000, 250)
    expect(Date.now() - resumed).toBeLessThan(15_000)
    expect(await pp.stop()).toBe(0)

    // The idle node has been idle through all of the above; give it at least 45 s in all.
    const idleReady = Date.parse(pi.lines.find((l) => l.kind === 'step' && l.step === 'ready')!.time)
    await new Promise((r) => setTimeout(r, Math.max(0, idleReady + 45_000 - Date.now())))
    expect(await pi.stop()).toBe(0)
    const summary = pi.lines.find((l) => l.kind === 'stopped')?.summary as {requestsSinceReady: number; secondsSinceReady: number}
    expect(summary.secondsSinceReady).toBeGreaterThanOrEqual(45)
    const perMinute = (summary.requestsSinceReady / summary.secondsSinceReady) * 60
    process.stdout.write(`idle API requests per minute: ${perMinute.toFixed(1)} (${summary.requestsSinceReady} in ${summary.secondsSinceReady.toFixed(0)} s)\n`)
    expect(perMinute).toBeLessThanOrEqual(7)
  })

  test('a clean exit marks the node NotReady and cordons it; the next up uncordons only what it cordoned; --rm deletes node and lease', async () => {
    const name = uniqueName('exit')
    let p = startVnode(name)
    await p.ready()
    expect(await p.stop('SIGINT')).toBe(0)
    let node = await readNode(name)
    expect(condition(node, 'Ready')).toMatchObject({status: 'False', reason: 'KubeletNotReady', message: 'node is shutting down'})
    expect(node.spec?.unschedulable).toBe(true)

    p = startVnode(name)
    await p.ready()
    node = await readNode(name)
    expect(node.spec?.unschedulable).toBeFalsy()
    // Cordoned by the user: stays cordoned across a vnode restart.
    expect((await kubectl(['cordon', name])).exitCode).toBe(0)
    expect(await p.stop()).toBe(0)
    p = startVnode(name)
    await p.ready()
    expect((await readNode(name)).spec?.unschedulable).toBe(true)
    expect(await p.stop()).toBe(0)

    p = startVnode(name, ['--rm'])
    await p.ready()
    expect(await p.stop()).toBe(0)
    await expect(readNode(name)).rejects.toMatchObject({code: 404})
    await expect(c.coordination.readNamespacedLease({name, namespace: 'kube-node-lease'})).rejects.toMatchObject({code: 404})
  })
})
