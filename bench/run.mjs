#!/usr/bin/env node
// `npm run bench [-- --quick]`: vnode against a floor client on a local
// control plane. Prints a table and writes bench/results.json as a list of
// {scenario, metric, value, unit} rows. Not part of `npm test`.
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {startFloor} from './floor.mjs'
import {median, percentile, podObserver, root, sleep, sleeperPod, startCluster, startVnode, stopAllVnodes, waitUntil} from './lib.mjs'

const quick = process.argv.includes('--quick')
const size = {
  start: quick ? 30 : 100,
  repeats: quick ? 1 : 3,
  throughput: quick ? 100 : 500,
  idleSeconds: quick ? 20 : 60,
  idlePods: quick ? [0, 30] : [0, 100, 500],
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
async function startBurst(nodeName, n) {
  const nsName = await namespace()
  const obs = await podObserver(cluster.kc, nsName)
  const sent = new Map()
  await Promise.all(
    Array.from({length: n}, async (_, i) => {
      const name = `p${i}`
      sent.set(name, performance.now())
      await cluster.core.createNamespacedPod({namespace: nsName, body: sleeperPod(name, nodeName)})
    }),
  )
  await waitUntil(() => obs.started.size >= n, `${n} pods running on ${nodeName}`, 120_000)
  const lat = [...obs.started].map(([name, t]) => t - sent.get(name))
  return {nsName, obs, lat}
}

async function deleteAll(nsName, obs, n) {
  const sent = new Map()
  const list = await cluster.core.listNamespacedPod({namespace: nsName})
  await Promise.all(
    list.items.map(async (p) => {
      sent.set(p.metadata.name, performance.now())
      await cluster.core.deleteNamespacedPod({name: p.metadata.name, namespace: nsName})
    }),
  )
  await waitUntil(() => obs.gone.size >= n, `${n} pods gone`, 180_000)
  return [...obs.gone].map(([name, t]) => t - sent.get(name))
}

try {
  // 1 + 2. Start latency, vnode against the floor, alternating, median of repeats.
  const vn = startVnode(cluster, 'bench-node')
  await vn.ready()
  await cluster.core.createNode({body: {metadata: {name: 'floor-node'}}})
  const floor = await startFloor(cluster.kc, 'floor-node')
  const v50 = [], v90 = [], v99 = [], f50 = [], f99 = []
  for (let r = 0; r < size.repeats; r++) {
    const v = await startBurst('bench-node', size.start)
    v50.push(percentile(v.lat, 50)), v90.push(percentile(v.lat, 90)), v99.push(percentile(v.lat, 99))
    const delLat = await deleteAll(v.nsName, v.obs, size.start)
    if (r === 0) {
      row('delete', 'p50', percentile(delLat, 50), 'ms')
      row('delete', 'p99', percentile(delLat, 99), 'ms')
    }
    v.obs.stop()
    const f = await startBurst('floor-node', size.start)
    f50.push(percentile(f.lat, 50)), f99.push(percentile(f.lat, 99))
    // The floor's deletions are not measured: clear its namespace at once.
    f.obs.stop()
    await cluster.core.deleteCollectionNamespacedPod({namespace: f.nsName, gracePeriodSeconds: 0})
  }
  const s = `start-${size.start}`
  row(s, 'p50', median(v50), 'ms')
  row(s, 'p90', median(v90), 'ms')
  row(s, 'p99', median(v99), 'ms')
  row(`floor-${size.start}`, 'p50', median(f50), 'ms')
  row(`floor-${size.start}`, 'p99', median(f99), 'ms')
  row(s, 'p50/floor', median(v50) / median(f50), 'ratio')
  row(s, 'p99/floor', median(v99) / median(f99), 'ratio')
  await floor.stop()

  // 5. Cost per pod lifecycle, counted by vnode.
  const before = await vn.stats()
  const c = await startBurst('bench-node', size.start)
  await deleteAll(c.nsName, c.obs, size.start)
  c.obs.stop()
  await sleep(500)
  const after = await vn.stats()
  const delta = (k) => ((after.byResource[k] ?? 0) - (before.byResource[k] ?? 0)) / size.start
  const writes = Object.keys(after.byResource)
    .filter((k) => /^(PATCH|PUT|POST|DELETE) pods/.test(k))
    .reduce((sum, k) => sum + delta(k), 0)
  row('cost-per-pod', 'api-writes (no events)', writes, 'requests')
  row('cost-per-pod', 'status-writes', delta('PATCH pods/status'), 'requests')
  row('cost-per-pod', 'deletes', delta('DELETE pods'), 'requests')
  row('cost-per-pod', 'events', delta('POST events') + delta('PATCH events'), 'requests')
  await vn.stop()

  // 3. Throughput, default QPS/burst and unthrottled.
  for (const [label, args] of [['qps50', []], ['unthrottled', ['--kube-api-qps', '0']]]) {
    const node = startVnode(cluster, `tp-${label}`, ['--pods', String(size.throughput + 10), ...args])
    await node.ready()
    const t0 = performance.now()
    const b = await startBurst(`tp-${label}`, size.throughput)
    const running = (performance.now() - t0) / 1000
    row(`throughput-${size.throughput}-${label}`, 'all-running', running, 's')
    row(`throughput-${size.throughput}-${label}`, 'start-rate', size.throughput / running, 'pods/s')
    const t1 = performance.now()
    await deleteAll(b.nsName, b.obs, size.throughput)
    const gone = (performance.now() - t1) / 1000
    row(`throughput-${size.throughput}-${label}`, 'delete-rate', size.throughput / gone, 'pods/s')
    b.obs.stop()
    await node.stop()
  }

  // 6. Idle cost with 0..N pods (TUI off).
  for (const n of size.idlePods) {
    const node = startVnode(cluster, `idle-${n}`, ['--pods', String(n + 10)])
    await node.ready()
    let nsName
    if (n > 0) nsName = (await startBurst(`idle-${n}`, n)).nsName
    await sleep(2000)
    const s0 = await node.stats()
    const u0 = node.usage()
    await sleep(size.idleSeconds * 1000)
    const s1 = await node.stats()
    const u1 = node.usage()
    row(`idle-${n}-pods`, 'requests-per-minute', ((s1.requests - s0.requests) / size.idleSeconds) * 60, 'req/min')
    row(`idle-${n}-pods`, 'cpu', ((u1.cpuSeconds - u0.cpuSeconds) / size.idleSeconds) * 100, '% of a core')
    row(`idle-${n}-pods`, 'rss', u1.rssBytes / 2 ** 20, 'MiB')
    await node.stop()
    if (nsName) await cluster.core.deleteNamespace({name: nsName}).catch(() => undefined)
  }

  // 7. Scale: N nodes in one process.
  {
    const node = startVnode(cluster, 'scale', ['--nodes', String(size.scaleNodes), '--pods', String(size.scalePods + 10)])
    await node.ready(120_000, size.scaleNodes)
    const u0 = node.usage()
    for (let i = 0; i < size.scaleNodes; i++) await startBurst(`scale-${i}`, size.scalePods)
    await sleep(2000)
    const a = node.usage()
    await sleep(size.idleSeconds * 1000)
    const b = node.usage()
    row(`scale-${size.scaleNodes}x${size.scalePods}`, 'rss-per-node', a.rssBytes / size.scaleNodes / 2 ** 20, 'MiB')
    row(`scale-${size.scaleNodes}x${size.scalePods}`, 'idle-cpu-per-node', ((b.cpuSeconds - a.cpuSeconds) / size.idleSeconds / size.scaleNodes) * 100, '% of a core')
    void u0
    await node.stop()
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
writeFileSync(out, `${JSON.stringify([...rows, ...notes.map((n) => ({scenario: 'note', metric: 'aborted', value: n, unit: ''}))], null, 2)}\n`)
if (notes.length) process.stderr.write(`${notes.join('\n')}\n`)
process.stdout.write(`\nwrote ${out}\n`)
