import {afterAll, beforeAll, expect} from '@jest/globals'
import {bridgeName} from '../../src/emulator/runtime/network/config.js'
import {
  clients,
  type Clients,
  createNamespace,
  deleteNamespace,
  describeMachineE2e,
  kubectl,
  processesMatching,
  startVnode,
  stopAllVnodes,
  testWhen,
  uniqueName,
  type VnodeProcess,
  waitFor,
} from './helpers.js'
import {createPod, podOn} from './faults-helpers.js'
import {isRoot, links} from './network-helpers.js'
import {expectNothingLeft, podNetns, poolMetrics, poolRecords} from './pool-helpers.js'

/** 1000 pods in bursts of 100: the pool's sizing follows the bursts, and nothing of any of them may outlive the node. */
const Bursts = 10
const BurstSize = 100

/**
 * The pool under churn, on the node as users run it with the pod network:
 * bursts that drain the pool, deletes that give everything back, the
 * pool refilling in between (to the burst's size: the second burst starts
 * on warm entries only). After 1000 pods and the node's stop, no
 * namespace, veth, lease, mount or cgroup of any pod or pool entry is left.
 */
describeMachineE2e('the warm pool after 1000 pods', () => {
  let c: Clients
  const ns = uniqueName('churn')
  const node = uniqueName('churn-node')
  const tag = uniqueName('churnmark')
  const root = isRoot()
  let vnode: VnodeProcess

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    if (!root) return
    vnode = startVnode(node, ['--sandbox', 'namespaces', '--pod-network', 'on', '--pods', String(BurstSize + 10), '--no-default-taint'])
    await vnode.ready(60_000)
  }, 90_000)
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  }, 90_000)

  testWhen(root, 'the pod network needs root')(
    `${Bursts} bursts of ${BurstSize} pods started and deleted, then the node stopped: nothing of any pod or pool entry is left`,
    async () => {
      const netnsSeen = new Set<string>()
      const vethsSeen = new Set<string>()
      const seePool = () => {
        for (const r of poolRecords(vnode)) netnsSeen.add(r.netns.split('/').pop()!)
      }
      // A sleeper that ends on SIGTERM, as a container's PID 1 must to end before its grace period: a shell (a
      // thousand starts of one cost the host far less than of node), its name the tag, its sleep a child the pod's
      // end takes with it.
      const container = {name: 'main', image: 'sh', command: ['/bin/sh', '-c', 'trap "exit 0" TERM; sleep 3600 & wait', tag]}
      let before: Record<string, number> = {}
      for (let b = 0; b < Bursts; b++) {
        seePool()
        if (b === 1) {
          // The first burst drained the pool (its floor); the quiet after it refills the pool to that burst's size,
          // under the default cap, so the second burst of the same size starts on warm entries only.
          let m: Record<string, number> = {}
          await waitFor(
            async () => {
              m = await poolMetrics(node)
              return m['vnode_sandbox_pool_entries:ready'] === BurstSize && m['vnode_sandbox_pool_entries:making'] === 0
            },
            () => `the pool refilled to the first burst's size (last: ${JSON.stringify(m)})`,
            240_000,
            1000,
          )
          expect(m).toMatchObject({vnode_sandbox_pool_target_entries: BurstSize, vnode_sandbox_pool_cap_entries: 128})
          before = m
        }
        const names = Array.from({length: BurstSize}, (_, i) => `b${b}-p${i}`)
        await Promise.all(names.map((name) => createPod(c.core, podOn(node, ns, name, [container]))))
        let last = ''
        await waitFor(
          async () => {
            const pods = (await c.core.listNamespacedPod({namespace: ns})).items
            const up = pods.filter((p) => p.status?.containerStatuses?.[0]?.state?.running && p.status.podIP)
            last = `${up.length}/${BurstSize} running`
            return up.length === BurstSize
          },
          () => `burst ${b + 1}: every pod running with its own address (${last})`,
          120_000,
          500,
        )
        if (b === 1) {
          const m = await poolMetrics(node)
          expect(m['vnode_sandbox_pool_leases_total:hit'] - before['vnode_sandbox_pool_leases_total:hit']).toBe(BurstSize)
          expect(m['vnode_sandbox_pool_leases_total:miss'] - before['vnode_sandbox_pool_leases_total:miss']).toBe(0)
        }
        const pods = (await c.core.listNamespacedPod({namespace: ns})).items
        // Each pod its own address: none shared by two pods of the burst.
        expect(new Set(pods.map((p) => p.status!.podIP)).size).toBe(BurstSize)
        for (const p of pods) netnsSeen.add(podNetns(vnode, p.metadata!.uid!)!.split('/').pop()!)
        for (const l of await links(bridgeName(node))) if (l.startsWith('veth')) vethsSeen.add(l)
        seePool()
        await kubectl(['delete', 'pod', '-n', ns, '--all', '--wait=false'])
        await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, `burst ${b + 1}: every pod gone`, 120_000, 500)
      }
      // The namespaces of 1000 pods were seen (a pool entry's is the pod's, so not every one is distinct from the pool's).
      expect(netnsSeen.size).toBeGreaterThanOrEqual(Bursts * BurstSize)
      seePool()
      expect(await vnode.stop()).toBe(0)
      await expectNothingLeft(vnode, node, [...netnsSeen], [...vethsSeen])
      expect(await processesMatching(tag)).toEqual([])
    },
    1_200_000,
  )
})
