import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {CoreV1Event} from '@kubernetes/client-node'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubectl, podProcesses, startVnode, stopAllVnodes, uniqueName, type VnodeProcess, waitFor} from './helpers.js'
import {createPod, fdCount, nodeContainer, podOn} from './faults-helpers.js'

interface Stats {
  openWatches: number
  podState: {status: number; workers: number; runtime: number}
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

export const StormPods = 200

describeE2e('a create/delete storm leaves nothing behind', () => {
  let c: Clients
  let p: VnodeProcess
  const ns = uniqueName('storm')
  const node = uniqueName('storm')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    p = startVnode(node, ['--no-default-taint', '--pods', '500'])
    await p.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test(`${StormPods} pods with mixed grace periods, deletes racing creates: no orphan process, empty state, fds and watches at baseline`, async () => {
    const baseline = {fds: fdCount(p.pid), stats: await stats(p)}
    expect(baseline.stats.podState).toEqual({status: 0, workers: 0, runtime: 0})
    const graces = [0, 1, 2, 5]
    const pods = Array.from({length: StormPods}, (_, i) => {
      const name = `storm-${i}`
      // Mostly a tiny binary; every tenth a process that ignores SIGTERM, so only SIGKILL at the deadline ends it.
      const container = i % 10 === 0 ? nodeContainer('app', "process.on('SIGTERM',()=>{});setInterval(()=>{},1000)") : {name: 'app', image: 'busybox', command: ['sleep', '3600']}
      return {
        pod: podOn(node, ns, name, [container], {terminationGracePeriodSeconds: graces[i % graces.length]}),
        deleteAfterMs: i % 2 ? (i * 37) % 1500 : 3000 + ((i * 53) % 5000),
        deleteGrace: i % 3 === 0 ? 0 : i % 3 === 1 ? 1 : undefined,
      }
    })
    const started = Date.now()
    await pool(pods, 16, async ({pod, deleteAfterMs, deleteGrace}) => {
      await createPod(c.core, pod)
      // Half the deletes land before the pod started or while it starts, half once it (likely) runs.
      setTimeout(() => {
        void c.core.deleteNamespacedPod({name: pod.metadata!.name!, namespace: ns, ...(deleteGrace === undefined ? {} : {gracePeriodSeconds: deleteGrace})}).catch(() => undefined)
      }, deleteAfterMs)
    })
    await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, 'every pod to be deleted', 150_000, 1000)
    // The storm was real: processes were started and killed (not just API objects churned),
    // and the node stayed Ready throughout (no eviction of its pods).
    // None of these containers exits by itself, so every pod whose container started was
    // killed by its delete, and says so (how many started before their delete is timing).
    // Events are written after the fact: wait for the node's queue to drain.
    let events: CoreV1Event[] = []
    const podsWith = (reason: string) => new Set(events.filter((e) => e.reason === reason).map((e) => e.involvedObject.name!))
    const startedNotKilled = () => [...podsWith('Started')].filter((name) => !podsWith('Killing').has(name))
    await waitFor(
      async () => {
        events = (await c.core.listNamespacedEvent({namespace: ns})).items
        return startedNotKilled().length === 0
      },
      () => `a Killing event for every started pod (none for ${startedNotKilled().join(', ')})`,
      60_000,
      1000,
    )
    const count = (reason: string) => events.filter((e) => e.reason === reason).reduce((n, e) => n + (e.count ?? 1), 0)
    expect(count('Started')).toBeGreaterThan(StormPods / 2)
    expect(count('NodeNotReady') + count('TaintManagerEviction')).toBe(0)

    // Nothing of the storm is left: no container process, no per-pod state, no extra watch or fd.
    await waitFor(
      () => podProcesses(p.pid).length === 0,
      () =>
        `no process left under vnode (have ${podProcesses(p.pid)
          .map((d) => `${d.pid} ${d.comm}`)
          .join(', ')})`,
      15_000,
    )
    const after = await waitFor(
      async () => {
        const s = await stats(p)
        return s.podState.status + s.podState.workers + s.podState.runtime === 0 ? s : undefined
      },
      'per-pod state to be empty',
      15_000,
      500,
    )
    expect(after.openWatches).toBe(baseline.stats.openWatches)
    // Idle pooled API connections may take a moment to close.
    await waitFor(
      () => fdCount(p.pid) <= baseline.fds,
      () => `fds back to ${baseline.fds} (have ${fdCount(p.pid)})`,
      30_000,
      500,
    )
    expect(p.child.exitCode).toBeNull()
    expect(Date.now() - started).toBeLessThan(180_000)
    expect(await p.stop()).toBe(0)
  })
})
