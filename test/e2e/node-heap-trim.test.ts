import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {DefaultHeapTrimQuietMs} from '../../src/common/heap-trim.js'
import {containerStatus, createPod, nodeContainer, podOn, waitPod} from './faults-helpers.js'
import {clients, createNamespace, deleteNamespace, describeE2e, kubectl, startVnode, stopAllVnodes, type Clients, uniqueName, waitFor} from './helpers.js'

/** The node's vnode_heap_trims_total, through the API server's node proxy, as a scraper reads it. */
async function heapTrims(node: string): Promise<number> {
  const r = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/metrics`])
  if (r.exitCode !== 0) throw new Error(`/metrics: ${r.stderr}`)
  const m = /^vnode_heap_trims_total (\d+)/m.exec(r.stdout)
  if (!m) throw new Error(`/metrics has no vnode_heap_trims_total:\n${r.stdout}`)
  return Number(m[1])
}

const Pods = 20

describeE2e("the node gives a burst's heap back once it is quiet", () => {
  let c: Clients
  const ns = uniqueName('heaptrim')
  const node = uniqueName('heaptrim')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    await startVnode(node, ['--no-default-taint']).ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c?.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  /** Waits for a trim past `before`, then idles twice the quiet time: no more come. The count after it. */
  async function trimThenNone(before: number, what: string): Promise<number> {
    const after = await waitFor(
      async () => {
        const n = await heapTrims(node)
        return n > before ? n : undefined
      },
      what,
      DefaultHeapTrimQuietMs * 4,
      500,
    )
    await new Promise((r) => setTimeout(r, DefaultHeapTrimQuietMs * 2))
    expect(await heapTrims(node)).toBe(after)
    return after
  }

  test("the node's own start, a burst of starts, then one of deletions: a full collection after each, none while the node idles", async () => {
    // Its start (modules, first lists) is a burst of its own: one trim once quiet.
    const afterStartup = await trimThenNone(0, "a trim after the node's start")
    const names = Array.from({length: Pods}, (_, i) => `p${i}`)
    await Promise.all(names.map((n) => createPod(c.core, podOn(node, ns, n, [nodeContainer('app', 'setInterval(()=>{},1000)')]))))
    for (const n of names) await waitPod(c.core, ns, n, (p) => !!containerStatus(p, 'app')?.state?.running, 'running', 60_000)
    // One per burst (a loaded host that spread the starts over more than the quiet time may run one more); then, idle with
    // its pods running (relists, status syncs), nothing more to give back.
    const afterStarts = await trimThenNone(afterStartup, 'a trim after the starts')
    await kubectl(['delete', 'pods', '--all', '-n', ns, '--wait=true', '--timeout=90s'])
    await trimThenNone(afterStarts, 'a trim after the deletions')
  })
})
