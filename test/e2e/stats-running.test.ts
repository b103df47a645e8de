import {beforeAll, expect, test} from '@jest/globals'
import {type Clients, describeE2e, kubectl, nodeWithNamespace, processesMatching, uniqueName, waitFor} from './helpers.js'

interface Summary {
  node: {nodeName: string; memory?: {workingSetBytes?: number}}
  pods: {podRef: {name: string; namespace: string}; containers: {name: string; memory?: {workingSetBytes?: number}; cpu?: {usageCoreNanoSeconds?: number}}[]}[]
}

/** The kubelet API's stats and metrics measure the real processes of a running pod. */
describeE2e('stats and metrics of a running pod, through the API server', () => {
  const f = nodeWithNamespace('stats')
  const {ns, node} = f
  const marker = uniqueName('stats-marker')
  let c: Clients
  beforeAll(() => {
    c = f.c
  })

  test('/stats/summary and /metrics/resource report the pod with its process memory and CPU', async () => {
    // Holds ~64 MiB and burns a little CPU, so both readings are clearly non-zero.
    const script = `const b = Buffer.alloc(64 * 1024 * 1024, 1); console.log('${marker}', b.length); setInterval(() => { let x = 0; for (let i = 0; i < 1e6; i++) x += i }, 100)`
    await c.core.createNamespacedPod({namespace: ns, body: {metadata: {name: 'busy'}, spec: {nodeName: node, containers: [{name: 'main', image: 'node', command: ['node', '-e', script]}]}}})
    await waitFor(async () => (await c.core.readNamespacedPod({name: 'busy', namespace: ns})).status?.containerStatuses?.[0]?.ready, 'busy running', 30_000)
    const [pid] = await processesMatching(marker)
    expect(pid).toBeGreaterThan(0)
    // Usage is sampled every few seconds: the sample that saw the buffer allocated is the one to read.
    let last: unknown
    const summary = await waitFor(
      async () => {
        const r = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/stats/summary`])
        const s = JSON.parse(r.stdout) as Summary
        const pod = s.pods.find((p) => p.podRef.name === 'busy' && p.podRef.namespace === ns)
        last = pod?.containers[0]
        const c0 = pod?.containers[0]
        return c0 && (c0.cpu?.usageCoreNanoSeconds ?? 0) > 0 && (c0.memory?.workingSetBytes ?? 0) > 64 * 2 ** 20 ? s : undefined
      },
      () => `the pod in /stats/summary with its 64 MiB (last: ${JSON.stringify(last)})`,
      30_000,
      500,
    )
    expect(summary.node.nodeName).toBe(node)
    const container = summary.pods.find((p) => p.podRef.name === 'busy')!.containers[0]
    expect(container.name).toBe('main')
    expect(container.memory!.workingSetBytes!).toBeGreaterThan(64 * 2 ** 20)
    const metrics = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/metrics/resource`])
    expect(metrics.exitCode).toBe(0)
    const line = metrics.stdout.split('\n').find((l) => l.startsWith('container_memory_working_set_bytes{') && l.includes(`pod="busy"`) && l.includes(`namespace="${ns}"`))
    expect(line).toBeDefined()
    // Labels by position: namespace, pod, container.
    expect(line!.split(' ')[0]).toBe(`container_memory_working_set_bytes{namespace="${ns}",pod="busy",container="main"}`)
    expect(Number(line!.split(' ')[1])).toBeGreaterThan(64 * 2 ** 20)
  })
})
