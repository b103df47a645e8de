import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Node, V1Pod} from '@kubernetes/client-node'
import {NODE} from './kubectl-fixture.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, processesMatching, startVnode, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

const ready = (n: V1Node | undefined) => n?.status?.conditions?.find((c) => c.type === 'Ready')
/** resourceVersions are etcd revisions here (one real etcd): one order across pods and nodes. */
const rv = (o: {metadata?: {resourceVersion?: string}}) => Number(o.metadata?.resourceVersion)

/**
 * The kubelet's graceful node shutdown order: the node says NotReady and is
 * cordoned before any pod is terminated, so a ReplicaSet's replacements go to
 * a node that has room, not to the one that is stopping.
 */
describeE2e('up exit order: NotReady and cordoned before the pods are terminated', () => {
  let c: Clients
  const ns = uniqueName('order')
  const group = uniqueName('group')
  const marker = uniqueName('order-proc')
  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await deleteNamespace(c.core, ns)
    await stopAllVnodes()
  })

  test("SIGTERM to up with a Deployment's pods: no replacement is bound to the stopping node; a second node takes them", async () => {
    const stoppingName = uniqueName('order-a')
    const otherName = uniqueName('order-b')
    // The stopping node is the roomier one: a scheduler that could still pick it would.
    const stopping = startVnode(stoppingName, ['--label', `vnode-e2e-group=${group}`, '--cpu', '16', '--memory', '32Gi', '--shutdown-grace', '5'])
    await stopping.ready()
    await c.apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: {name: 'web'},
        spec: {
          replicas: 3,
          selector: {matchLabels: {app: 'web'}},
          template: {
            metadata: {labels: {app: 'web'}},
            spec: {
              nodeSelector: {'vnode-e2e-group': group},
              tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}],
              terminationGracePeriodSeconds: 5,
              containers: [{name: 'web', image: 'node', command: [NODE, '-e', 'setInterval(() => {}, 1000)', marker], resources: {requests: {cpu: '100m', memory: '64Mi'}}}],
            },
          },
        },
      },
    })
    const originals = await waitFor(
      async () => {
        const pods = (await c.core.listNamespacedPod({namespace: ns})).items
        const running = pods.filter((p) => p.spec?.nodeName === stoppingName && p.status?.containerStatuses?.[0]?.ready)
        return running.length === 3 ? running : undefined
      },
      'three Deployment pods running on the first node',
      60_000,
      250,
    )
    const originalUids = new Set(originals.map((p) => p.metadata!.uid!))

    const other = startVnode(otherName, ['--label', `vnode-e2e-group=${group}`, '--cpu', '1', '--memory', '2Gi', '--shutdown-grace', '5'])
    await other.ready()

    // Every version of every pod and of the stopping node, as the API server commits them.
    const seenPods: V1Pod[] = []
    const seenNodes: V1Node[] = []
    const watch = new c.lib.Watch(c.kc)
    const watches = await Promise.all([
      watch.watch(
        `/api/v1/namespaces/${ns}/pods`,
        {},
        (_t: string, p: V1Pod) => void seenPods.push(p),
        () => undefined,
      ),
      watch.watch(
        '/api/v1/nodes',
        {fieldSelector: `metadata.name=${stoppingName}`},
        (_t: string, n: V1Node) => void seenNodes.push(n),
        () => undefined,
      ),
    ])
    try {
      await waitFor(() => seenNodes.length > 0 && seenPods.length >= 3, 'the watches to list', 10_000, 50)
      expect(await stopping.stop('SIGTERM')).toBe(0)

      let last: V1Pod[] = []
      const replacements = await waitFor(
        async () => {
          last = (await c.core.listNamespacedPod({namespace: ns})).items.filter((p) => !originalUids.has(p.metadata!.uid!))
          return last.length >= 3 && last.filter((p) => p.spec?.nodeName === otherName && p.status?.containerStatuses?.[0]?.ready).length === 3 ? last : undefined
        },
        () =>
          `three replacements running on the second node (replacements: ${last.map((p) => `${p.spec?.nodeName === stoppingName ? 'stopping node' : p.spec?.nodeName === otherName ? 'second node' : 'unbound'} ${p.status?.phase}`).join(', ')})`,
        60_000,
        250,
      )
      expect(replacements.map((p) => p.spec?.nodeName)).toEqual(replacements.map(() => otherName))
      // The stopped node's processes are gone: what runs is the second node's three.
      await waitFor(async () => (await processesMatching(marker)).length === 3, 'three pod processes, all of the second node', 10_000, 200)

      // No version of any replacement was ever bound to the stopping node.
      const boundThere = seenPods.filter((p) => !originalUids.has(p.metadata!.uid!) && p.spec?.nodeName === stoppingName)
      expect(boundThere.map((p) => `${p.metadata?.name} ${p.status?.phase}`)).toEqual([])

      // The node was NotReady ("node is shutting down") and cordoned before the first pod's termination was written.
      const firstTerminated = seenPods
        .filter((p) => originalUids.has(p.metadata!.uid!) && (p.status?.phase === 'Failed' || p.status?.containerStatuses?.[0]?.state?.terminated))
        .sort((a, b) => rv(a) - rv(b))[0]
      expect(firstTerminated).toBeDefined()
      const cordoned = seenNodes.filter((n) => n.spec?.unschedulable).sort((a, b) => rv(a) - rv(b))[0]
      const notReady = seenNodes.filter((n) => ready(n)?.status === 'False').sort((a, b) => rv(a) - rv(b))[0]
      expect(ready(notReady)).toMatchObject({status: 'False', reason: 'KubeletNotReady', message: 'node is shutting down'})
      expect(rv(notReady)).toBeLessThan(rv(firstTerminated))
      expect(rv(cordoned)).toBeLessThan(rv(firstTerminated))
      expect(firstTerminated.status).toMatchObject({phase: 'Failed', reason: 'Terminated'})

      // The summary is the last line of -o json, after every stopping step.
      expect(stopping.lines.at(-1)?.kind).toBe('stopped')
      const steps = stopping.lines.filter((l) => l.kind === 'stopping').map((l) => l.message)
      expect(steps[0]).toBe('marking node NotReady and cordoning it')
      expect(steps.indexOf('marking node NotReady and cordoning it')).toBeLessThan(steps.findIndex((m) => m.startsWith('terminating pods')))
    } finally {
      for (const w of watches) w.abort()
    }
    await c.apps.deleteNamespacedDeployment({name: 'web', namespace: ns})
    expect(await other.stop('SIGTERM')).toBe(0)
    await waitFor(async () => (await processesMatching(marker)).length === 0, 'no pod process left', 15_000, 200)
  })
})
