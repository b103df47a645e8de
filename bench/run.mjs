#!/usr/bin/env node
// `npm run bench [-- --quick] [-- --only start,cost,...]`: vnode against a
// floor client on a local control plane. Prints a table and writes
// bench/results.json as a list of {scenario, metric, value, unit} rows, ending
// with one row per goal (met or missed, and why). Not part of `npm test`.
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {startFloor} from './floor.mjs'
import {judge} from './goals.mjs'
import {apiserverRequests, median, percentile, podObserver, root, sleep, sleeperPod, startCluster, startVnode, startVnodeTui, stopAllVnodes, waitUntil} from './lib.mjs'

const quick = process.argv.includes('--quick')
const onlyArg = process.argv.find((a) => a.startsWith('--only'))
const only = onlyArg ? (onlyArg.includes('=') ? onlyArg.split('=')[1] : process.argv[process.argv.indexOf(onlyArg) + 1]).split(',') : undefined
const Scenarios = ['start', 'sandbox', 'token', 'cost', 'throughput', 'idle', 'tui', 'scale']
if (only?.some((s) => !Scenarios.includes(s))) throw new Error(`--only takes ${Scenarios.join(',')}`)
const want = (s) => !only || only.includes(s)
const size = {
  start: quick ? 30 : 100,
  deleteOne: quick ? 10 : 30,
  repeats: quick ? 1 : 3,
  throughput: quick ? 100 : 500,
  idleSeconds: quick ? 20 : 60,
  idlePods: quick ? [0, 30] : [0, 100, 500],
  tuiPods: quick ? [0] : [0, 100],
  scaleNodes: quick ? 4 : 20,
  scalePods: quick ? 10 : 50,
}
const rows = []
const notes = []
const row = (scenario, metric, value, unit) => {
  rows.push({scenario, metric, value: Math.round(value * 100) / 100, unit})
  process.stdout.write(`${scenario.padEnd(24)} ${metric.padEnd(28)} ${String(Math.round(value * 100) / 100).padStart(10)} ${unit}\n`)
}

const cluster = startCluster()
let ns = 0
async function namespace() {
  const name = `bench-${++ns}`
  await cluster.core.createNamespace({body: {metadata: {name}}})
  // Pods are admitted once the controller-manager made the namespace's default service account.
  await waitUntil(() => cluster.core.readNamespacedServiceAccount({name: 'default', namespace: name}).then(() => true, () => false), `service account in ${name}`, 30_000)
  return name
}

/** Creates n pods in a burst and returns per-pod start latencies (ms, from the create call to all containers seen running). */
async function startBurst(nodeName, n, podExtra = {}, prepare = async () => undefined) {
  const nsName = await namespace()
  await prepare(nsName)
  const obs = await podObserver(cluster.kc, nsName)
  const sent = new Map()
  await Promise.all(
    Array.from({length: n}, async (_, i) => {
      const name = `p${i}`
      const body = sleeperPod(name, nodeName, podExtra)
      sent.set(name, performance.now())
      await cluster.core.createNamespacedPod({namespace: nsName, body})
    }),
  )
  await waitUntil(() => obs.started.size >= n, `${n} pods running on ${nodeName}`, 180_000)
  const lat = [...obs.started].map(([name, t]) => t - sent.get(name))
  return {nsName, obs, lat}
}

/** Deletes every pod of the namespace at once (graceful); per-pod latency from the delete call to the object gone. */
async function deleteAll(nsName, obs, n) {
  const sent = new Map()
  const list = await cluster.core.listNamespacedPod({namespace: nsName})
  await Promise.all(
    list.items.map(async (p) => {
      sent.set(p.metadata.name, performance.now())
      await cluster.core.deleteNamespacedPod({name: p.metadata.name, namespace: nsName})
    }),
  )
  await waitUntil(() => obs.gone.size >= n, `${n} pods gone`, 300_000)
  return [...obs.gone].map(([name, t]) => t - sent.get(name))
}

async function dropNamespace(nsName) {
  await cluster.core.deleteCollectionNamespacedPod({namespace: nsName, gracePeriodSeconds: 0}).catch(() => undefined)
  await cluster.core.deleteNamespace({name: nsName}).catch(() => undefined)
}

/** Requests per pod lifecycle (start, graceful delete), counted by vnode and by the API server. */
async function costPerPod(vn, nodeName, n, variant = {}) {
  const scenario = variant.scenario ?? 'cost-per-pod'
  const before = await vn.stats()
  const server0 = await apiserverRequests(cluster.kc)
  const c = await startBurst(nodeName, n, variant.podExtra, variant.prepare)
  await deleteAll(c.nsName, c.obs, n)
  c.obs.stop()
  await sleep(1000)
  const after = await vn.stats()
  const server1 = await apiserverRequests(cluster.kc)
  const delta = (k) => ((after.byResource[k] ?? 0) - (before.byResource[k] ?? 0)) / n
  const serverDelta = (k) => ((server1.get(k) ?? 0) - (server0.get(k) ?? 0)) / n
  const writes = Object.keys(after.byResource)
    .filter((k) => /^(PATCH|PUT|POST|DELETE) pods/.test(k))
    .reduce((sum, k) => sum + delta(k), 0)
  if (variant.scenario) {
    // Pods referencing one ConfigMap (volume and env) with the default token: what the referenced objects cost.
    row(scenario, 'configmap-reads', delta('GET configmaps'), 'requests')
    row(scenario, 'configmap-watches (per burst)', delta('WATCH configmaps') * n, 'requests')
    row(scenario, 'token-requests', delta('POST serviceaccounts/token'), 'requests')
    row(scenario, 'reads', Object.keys(after.byResource).filter((k) => /^GET /.test(k)).reduce((sum, k) => sum + delta(k), 0), 'requests')
    return
  }
  row('cost-per-pod', 'api-writes (no events)', writes, 'requests')
  row('cost-per-pod', 'status-writes', delta('PATCH pods/status'), 'requests')
  row('cost-per-pod', 'deletes', delta('DELETE pods'), 'requests')
  row('cost-per-pod', 'events', delta('POST events') + delta('PATCH events'), 'requests')
  row('cost-per-pod', 'reads', Object.keys(after.byResource).filter((k) => /^GET /.test(k)).reduce((sum, k) => sum + delta(k), 0), 'requests')
  // The API server's own count: only vnode patches pod status; the bench itself sent one DELETE per pod.
  row('cost-per-pod', 'status-writes (API server)', serverDelta('PATCH pods/status'), 'requests')
  row('cost-per-pod', 'deletes (API server, minus the bench)', serverDelta('DELETE pods') - 1, 'requests')
}

try {
  let vn
  const node = async () => {
    if (!vn) {
      vn = startVnode(cluster, 'bench-node', ['--pods', String(size.start + 10)])
      await vn.ready()
    }
    return vn
  }

  // 1 + 2 + 4. Start latency against the floor (alternating, median of repeats), and delete latency.
  if (want('start')) {
    await node()
    await cluster.core.createNode({body: {metadata: {name: 'floor-node'}}})
    const floor = await startFloor(cluster.kc, 'floor-node')
    const v50 = [], v90 = [], v99 = [], f50 = [], f99 = [], d50 = [], d99 = []
    for (let r = 0; r < size.repeats; r++) {
      const v = await startBurst('bench-node', size.start)
      v50.push(percentile(v.lat, 50))
      v90.push(percentile(v.lat, 90))
      v99.push(percentile(v.lat, 99))
      const delLat = await deleteAll(v.nsName, v.obs, size.start)
      d50.push(percentile(delLat, 50))
      d99.push(percentile(delLat, 99))
      v.obs.stop()
      const f = await startBurst('floor-node', size.start)
      f50.push(percentile(f.lat, 50))
      f99.push(percentile(f.lat, 99))
      // The floor's deletions are not measured: clear its namespace at once.
      f.obs.stop()
      await dropNamespace(f.nsName)
    }
    const s = `start-${size.start}`
    row(s, 'p50', median(v50), 'ms')
    row(s, 'p90', median(v90), 'ms')
    row(s, 'p99', median(v99), 'ms')
    row(`floor-${size.start}`, 'p50', median(f50), 'ms')
    row(`floor-${size.start}`, 'p99', median(f99), 'ms')
    row(s, 'p50/floor', median(v50) / median(f50), 'ratio')
    row(s, 'p99/floor', median(v99) / median(f99), 'ratio')
    row(`delete-burst-${size.start}`, 'p50', median(d50), 'ms')
    row(`delete-burst-${size.start}`, 'p99', median(d99), 'ms')
    await floor.stop()

    // One deletion at a time: the latency of a deletion itself, without a queue of others before it.
    const one = await startBurst('bench-node', size.deleteOne)
    const lat = []
    for (let i = 0; i < size.deleteOne; i++) {
      const t0 = performance.now()
      await cluster.core.deleteNamespacedPod({name: `p${i}`, namespace: one.nsName})
      await waitUntil(() => one.obs.gone.has(`p${i}`), `p${i} gone`, 60_000)
      lat.push(one.obs.gone.get(`p${i}`) - t0)
    }
    one.obs.stop()
    row('delete-one-at-a-time', 'p50', percentile(lat, 50), 'ms')
    row('delete-one-at-a-time', 'p99', percentile(lat, 99), 'ms')
  }

  // The same burst on a node whose pods run in a sandbox (mount, PID, UTS namespaces), beside the plain node, alternating.
  if (want('sandbox')) {
    const plain = await node()
    const sbx = startVnode(cluster, 'bench-sandbox', ['--pods', String(size.start + 10), '--sandbox', 'namespaces'])
    await sbx.ready()
    const p50 = [], p99 = [], s50 = [], s99 = []
    for (let r = 0; r < size.repeats; r++) {
      const p = await startBurst('bench-node', size.start)
      p50.push(percentile(p.lat, 50))
      p99.push(percentile(p.lat, 99))
      p.obs.stop()
      await dropNamespace(p.nsName)
      const s = await startBurst('bench-sandbox', size.start)
      s50.push(percentile(s.lat, 50))
      s99.push(percentile(s.lat, 99))
      s.obs.stop()
      await dropNamespace(s.nsName)
    }
    row(`start-${size.start}-plain`, 'p50', median(p50), 'ms')
    row(`start-${size.start}-plain`, 'p99', median(p99), 'ms')
    row(`start-${size.start}-sandbox`, 'p50', median(s50), 'ms')
    row(`start-${size.start}-sandbox`, 'p99', median(s99), 'ms')
    row(`start-${size.start}-sandbox`, 'p99/plain', median(s99) / median(p99), 'ratio')
    const idle = await sbx.usage()
    row('sandbox-node', 'rss', idle.rssBytes / 2 ** 20, 'MiB')
    await sbx.stop()
    void plain
  }

  // The same burst with the default service account token mounted: one TokenRequest more per pod.
  if (want('token')) {
    await node()
    const t = await startBurst('bench-node', size.start, {automountServiceAccountToken: true})
    row(`start-${size.start}-token`, 'p50', percentile(t.lat, 50), 'ms')
    row(`start-${size.start}-token`, 'p99', percentile(t.lat, 99), 'ms')
    await deleteAll(t.nsName, t.obs, size.start)
    t.obs.stop()
  }

  // 5. Cost per pod lifecycle.
  if (want('cost')) await costPerPod(await node(), 'bench-node', size.start)
  if (want('cost')) {
    await costPerPod(await node(), 'bench-node', size.start, {
      scenario: 'cost-per-pod-configmap',
      prepare: (ns) => cluster.core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'shared'}, data: {k: 'v'}}}),
      podExtra: {
        automountServiceAccountToken: true,
        volumes: [{name: 'cfg', configMap: {name: 'shared'}}],
        containers: [{name: 'c', image: 'sleep', command: ['sleep', '3600'], env: [{name: 'K', valueFrom: {configMapKeyRef: {name: 'shared', key: 'k'}}}], volumeMounts: [{name: 'cfg', mountPath: '/cfg'}]}],
      },
    })
  }
  await vn?.stop()

  // 3. Throughput, default QPS/burst and unthrottled.
  if (want('throughput')) {
    for (const [label, args] of [['qps50', []], ['unthrottled', ['--kube-api-qps', '0']]]) {
      const tp = startVnode(cluster, `tp-${label}`, ['--pods', String(size.throughput + 10), ...args])
      await tp.ready()
      const t0 = performance.now()
      const b = await startBurst(`tp-${label}`, size.throughput)
      const running = (performance.now() - t0) / 1000
      row(`throughput-${size.throughput}-${label}`, 'all-running', running, 's')
      row(`throughput-${size.throughput}-${label}`, 'start-rate', size.throughput / running, 'pods/s')
      const t1 = performance.now()
      await deleteAll(b.nsName, b.obs, size.throughput)
      const gone = (performance.now() - t1) / 1000
      row(`throughput-${size.throughput}-${label}`, 'all-gone', gone, 's')
      row(`throughput-${size.throughput}-${label}`, 'delete-rate', size.throughput / gone, 'pods/s')
      b.obs.stop()
      await tp.stop()
    }
  }

  // The start burst with cgroups (a cgroup per pod and container) beside the plain mode, alternating in the same run.
  if (want('cgroups')) {
    const modes = [['cgroups', []], ['plain', ['--cgroups', 'none']]]
    const nodes = []
    for (const [label, args] of modes) {
      const n = startVnode(cluster, `cg-${label}`, ['--pods', String(size.start + 10), ...args])
      await n.ready()
      nodes.push(n)
    }
    const p50 = {cgroups: [], plain: []}
    const p99 = {cgroups: [], plain: []}
    for (let r = 0; r < size.repeats; r++) {
      for (const [label] of modes) {
        const b = await startBurst(`cg-${label}`, size.start)
        p50[label].push(percentile(b.lat, 50))
        p99[label].push(percentile(b.lat, 99))
        await deleteAll(b.nsName, b.obs, size.start)
        b.obs.stop()
      }
    }
    for (const [label] of modes) {
      row(`start-${size.start}-${label}`, 'p50', median(p50[label]), 'ms')
      row(`start-${size.start}-${label}`, 'p99', median(p99[label]), 'ms')
    }
    row(`start-${size.start}-cgroups`, 'p50/plain', median(p50.cgroups) / median(p50.plain), 'ratio')
    for (const n of nodes) await n.stop()
  }

  // 6. Idle cost with 0..N pods, without and with the dashboard.
  const idle = async (n, tui) => {
    const name = `idle-${n}${tui ? '-tui' : ''}`
    const args = ['--pods', String(n + 10)]
    const node = tui ? await startVnodeTui(cluster, name, args) : startVnode(cluster, name, args)
    await node.ready()
    let nsName
    if (n > 0) nsName = (await startBurst(name, n)).nsName
    // Idle means after the start's work: its events drain at 50/s (three per pod), then nothing moves.
    await sleep(5000 + ((n * 3) / 50) * 1000)
    if (!tui) await quiet(node)
    const s0 = tui ? undefined : await node.stats()
    const u0 = node.usage()
    await sleep(size.idleSeconds * 1000)
    const s1 = tui ? undefined : await node.stats()
    const u1 = node.usage()
    const scenario = `idle-${n}-pods${tui ? '-tui' : ''}`
    if (!tui) row(scenario, 'requests-per-minute', ((s1.requests - s0.requests) / size.idleSeconds) * 60, 'req/min')
    row(scenario, 'cpu', ((u1.cpuSeconds - u0.cpuSeconds) / size.idleSeconds) * 100, '% of a core')
    row(scenario, 'rss', u1.rssBytes / 2 ** 20, 'MiB')
    await node.stop()
    if (nsName) await dropNamespace(nsName)
  }
  /** Until the node's request count stands still for 3 s (bounded). */
  const quiet = async (node) => {
    let last = (await node.stats()).requests
    for (let i = 0; i < 20; i++) {
      await sleep(3000)
      const now = (await node.stats()).requests
      if (now - last <= 1) return
      last = now
    }
  }
  if (want('idle')) for (const n of size.idlePods) await idle(n, false)
  if (want('tui')) for (const n of size.tuiPods) await idle(n, true)

  // 7. Scale: N nodes in one process.
  if (want('scale')) {
    const sc = startVnode(cluster, 'scale', ['--nodes', String(size.scaleNodes), '--pods', String(size.scalePods + 10)])
    await sc.ready(180_000, size.scaleNodes)
    for (let i = 0; i < size.scaleNodes; i++) await startBurst(`scale-${i}`, size.scalePods)
    await sleep(5000 + ((size.scaleNodes * size.scalePods * 3) / 50 / size.scaleNodes) * 1000)
    const a = sc.usage()
    const s0 = await sc.statsAll(size.scaleNodes)
    await sleep(size.idleSeconds * 1000)
    const b = sc.usage()
    const s1 = await sc.statsAll(size.scaleNodes)
    const requests = s1.reduce((sum, s) => sum + s.requests, 0) - s0.reduce((sum, s) => sum + s.requests, 0)
    const scenario = `scale-${size.scaleNodes}x${size.scalePods}`
    row(scenario, 'rss-per-node', b.rssBytes / size.scaleNodes / 2 ** 20, 'MiB')
    row(scenario, 'idle-cpu-per-node', ((b.cpuSeconds - a.cpuSeconds) / size.idleSeconds / size.scaleNodes) * 100, '% of a core')
    row(scenario, 'requests-per-minute-per-node', (requests / size.idleSeconds / size.scaleNodes) * 60, 'req/min')
    await sc.stop()
  }
} catch (error) {
  notes.push(`aborted: ${error.message}`)
  process.stderr.write(`bench: ${error.stack}\n`)
  process.exitCode = 1
} finally {
  await stopAllVnodes()
  cluster.stop()
}

const out = join(root, 'bench', 'results.json')
const goalRows = judge(rows)
for (const g of goalRows) process.stdout.write(`goal ${g.value.padEnd(7)} ${g.metric}${g.unit ? `: ${g.unit}` : ''}\n`)
writeFileSync(out, `${JSON.stringify([...rows, ...goalRows, ...notes.map((n) => ({scenario: 'note', metric: 'aborted', value: n, unit: ''}))], null, 2)}\n`)
if (notes.length) process.stderr.write(`${notes.join('\n')}\n`)
process.stdout.write(`\nwrote ${out}\n`)
