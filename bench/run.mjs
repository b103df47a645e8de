#!/usr/bin/env node
// `npm run bench [-- --quick] [-- --only start,cost,...] [-- --strict]`: vnode
// against a floor client on a local control plane, vnode's modes (sandbox,
// cgroups, pod network, the node as users run it) against its plain mode, and
// vnode against the reference kubelet in the same cluster where the machine
// allows one. Prints a table and writes a list of {scenario, metric, value,
// unit, load} rows, ending with one row per goal (met, missed and why, or not
// measured and why): a full run to bench/results.json, a --quick or --only run
// to a file of its own (results-quick.json, results-partial.json), so a small
// run never stands for the full one. --strict exits 1 unless every goal is met.
// Not part of `npm test`.
import {execFile} from 'node:child_process'
import {rmSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {loadavg} from 'node:os'
import {join} from 'node:path'
import {startFloor} from './floor.mjs'
import {judge, runKind, ResultsFiles} from './goals.mjs'
import {benchLeftovers} from './leftovers.mjs'
import {
  apiserverRequests,
  median,
  nodesStarted,
  percentile,
  podObserver,
  machineQuiet,
  poolSettled,
  root,
  sleep,
  sleeperPod,
  startCluster,
  startVnode,
  startVnodeTui,
  stopAllObservers,
  stopAllVnodes,
  waitUntil,
} from './lib.mjs'
import {memoryOf, vnodeRuntimePids} from './memory.mjs'
import {ModeLabels, Modes, modeUnavailable} from './modes.mjs'
import {portableContainer, referenceUnavailable, startReference} from './reference.mjs'
import {relayUnavailable} from './relay.mjs'

const quick = process.argv.includes('--quick')
const strict = process.argv.includes('--strict')
const onlyArg = process.argv.find((a) => a.startsWith('--only'))
const only = onlyArg ? (onlyArg.includes('=') ? onlyArg.split('=')[1] : process.argv[process.argv.indexOf(onlyArg) + 1]).split(',') : undefined
const Scenarios = ['start', 'default', 'sandbox', 'walls', 'cgroups', 'network', 'kubelet', 'relay', 'token', 'cost', 'throughput', 'idle', 'tui', 'scale']
if (only?.some((s) => !Scenarios.includes(s))) throw new Error(`--only takes ${Scenarios.join(',')}`)
/** The first argument the bench does not know: a typo or --help would otherwise start a whole run. */
function unknownArg(argv) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--only' || argv[i] === '--start-pods') i++
    else if (!['--quick', '--strict'].includes(argv[i]) && !argv[i].startsWith('--only=')) return argv[i]
  }
  return undefined
}
const unknown = unknownArg(process.argv.slice(2))
if (unknown !== undefined) {
  const help = unknown === '--help' || unknown === '-h'
  process[help ? 'stdout' : 'stderr'].write(
    `${help ? '' : `bench: unknown argument ${unknown}\n`}usage: npm run bench [-- --quick] [-- --only ${Scenarios.join(',')}] [-- --start-pods N] [-- --strict]\n`,
  )
  process.exit(help ? 0 : 2)
}
const want = (s) => !only || only.includes(s)
/** `--start-pods N`: the start bursts' size (a small run on a busy machine). */
const startPodsArg = process.argv.indexOf('--start-pods')
const size = {
  start: startPodsArg > 0 ? Number(process.argv[startPodsArg + 1]) : quick ? 30 : 100,
  deleteOne: quick ? 10 : 30,
  repeats: quick ? 1 : 3,
  throughput: quick ? 100 : 500,
  idleSeconds: quick ? 20 : 60,
  idlePods: quick ? [0, 30] : [0, 100, 500],
  /** The node as users run it puts each pod on the pod network, whose per-node range (a /24) holds 253 pods. */
  idlePodsDefault: quick ? [0, 30] : [0, 100],
  tuiPods: quick ? [0] : [0, 100],
  /** kubectl logs and exec through the relay and direct: this many of each, alternating. */
  relayRequests: quick ? 10 : 30,
  scaleNodes: quick ? 4 : 20,
  scalePods: quick ? 10 : 50,
  /** After a burst, before its memory is read: the start's own work (events, status writes, the kubelet's housekeeping) done. */
  settleMs: quick ? 5_000 : 20_000,
}
const rows = []
const notes = []
/** Notes of the run other than an abort: scenarios not run, what was left behind. */
const noteRows = []
/** A scenario that cannot run on this machine: one note saying why, and the rest of the bench runs. */
const skip = (scenario, why) => {
  noteRows.push({scenario: 'note', metric: `${scenario} not run`, value: why, unit: ''})
  process.stdout.write(`${scenario.padEnd(24)} not run: ${why}\n`)
}
const podUids = new Set()
const log = (line) => process.stderr.write(`${line}\n`)
/** Every figure carries the machine's 1-minute load when it was taken: the machines are shared, and a figure without its load cannot be compared. */
const row = (scenario, metric, value, unit) => {
  const load = Math.round(loadavg()[0] * 100) / 100
  rows.push({scenario, metric, value: Math.round(value * 100) / 100, unit, load})
  process.stdout.write(`${scenario.padEnd(24)} ${metric.padEnd(28)} ${String(Math.round(value * 100) / 100).padStart(10)} ${unit.padEnd(6)} load ${load.toFixed(2)}\n`)
}

const cluster = startCluster()
/** What a scenario started outside vnode (the reference kubelet): stopped at the end even when the scenario failed. */
const cleanups = []

/**
 * Stops every node and the control plane, then looks for anything of this run
 * still there. The run's directory is removed only when nothing is mounted
 * under it (a mount left there may be a bind of a host directory).
 */
let stopping
const stopEverything = () => (stopping ??= stopAndCheck())
async function stopAndCheck() {
  stopAllObservers()
  await stopAllVnodes()
  for (const c of cleanups.splice(0)) await c().catch((e) => notes.push(`cleanup: ${e.message}`))
  cluster.down()
  const left = await benchLeftovers({dir: cluster.dir, nodes: nodesStarted, podUids})
  row('leftovers', 'after the run', left.length, 'count')
  if (left.length > 0) {
    noteRows.push({scenario: 'note', metric: 'left behind', value: left.join(', '), unit: ''})
    process.stderr.write(`bench: left behind: ${left.join(', ')}\n`)
    process.exitCode = 1
  }
  if (!left.some((l) => l.startsWith('mount '))) rmSync(cluster.dir, {recursive: true, force: true})
}
// Ctrl-C: the reference kubelet and containerd run in their own process groups, so they are stopped here.
const interrupted = () => {
  process.stderr.write('bench: interrupted, stopping everything\n')
  void stopEverything().finally(() => process.exit(130))
}
process.once('SIGINT', interrupted)
/** A scenario that failed midway: its nodes are stopped (its finally), the failure noted, and the bench goes on. */
const scenarioFailed = (scenario) => (error) => {
  notes.push(`${scenario}: ${error.message}`)
  process.stderr.write(`bench: ${scenario}: ${error.stack}\n`)
  process.exitCode = 1
}
let ns = 0
async function namespace() {
  const name = `bench-${++ns}`
  await cluster.core.createNamespace({body: {metadata: {name}}})
  // Pods are admitted once the controller-manager made the namespace's default service account.
  await waitUntil(
    () =>
      cluster.core.readNamespacedServiceAccount({name: 'default', namespace: name}).then(
        () => true,
        () => false,
      ),
    `service account in ${name}`,
    30_000,
  )
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
      const pod = await cluster.core.createNamespacedPod({namespace: nsName, body})
      podUids.add(pod.metadata.uid)
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
    row(
      scenario,
      'reads',
      Object.keys(after.byResource)
        .filter((k) => /^GET /.test(k))
        .reduce((sum, k) => sum + delta(k), 0),
      'requests',
    )
    return
  }
  row('cost-per-pod', 'api-writes (no events)', writes, 'requests')
  row('cost-per-pod', 'status-writes', delta('PATCH pods/status'), 'requests')
  row('cost-per-pod', 'deletes', delta('DELETE pods'), 'requests')
  row('cost-per-pod', 'events', delta('POST events') + delta('PATCH events'), 'requests')
  row(
    'cost-per-pod',
    'reads',
    Object.keys(after.byResource)
      .filter((k) => /^GET /.test(k))
      .reduce((sum, k) => sum + delta(k), 0),
    'requests',
  )
  // The API server's own count: only vnode patches pod status; the bench itself sent one DELETE per pod.
  row('cost-per-pod', 'status-writes (API server)', serverDelta('PATCH pods/status'), 'requests')
  row('cost-per-pod', 'deletes (API server, minus the bench)', serverDelta('DELETE pods') - 1, 'requests')
}

/** The pod every node of the mode and kubelet scenarios runs: busybox, ending on SIGTERM as a container's PID 1 must. */
const portablePod = {containers: [portableContainer()]}

/**
 * The start and delete bursts on each node in turn, size.repeats rounds (the
 * order reversed every other round, so no node always follows the same one),
 * and in the last round what each node's runtime holds with the pods running.
 * Medians of the rounds' percentiles, per node label, and the first round's
 * start p99 (cold: a node's warm pool holds only its floor before its first
 * burst, and as many as that burst after it). Each burst begins once every
 * node's warm pool has settled and the machine is quiet (machineQuiet), so no
 * burst shares the CPU with a refill or with the last node's teardown; the
 * longest wait after each node's bursts is kept (quietWaits, ms).
 */
async function alternateBursts(nodes) {
  const res = Object.fromEntries(nodes.map((n) => [n.label, {s50: [], s99: [], d50: [], d99: []}]))
  const quietWaits = {}
  let previous
  for (let r = 0; r < size.repeats; r++) {
    for (const n of r % 2 === 0 ? nodes : [...nodes].reverse()) {
      for (const m of nodes) if (m.node?.stateDir) await poolSettled(m.node.stateDir)
      const waited = await machineQuiet()
      if (previous) quietWaits[previous] = Math.max(quietWaits[previous] ?? 0, waited)
      previous = n.label
      const b = await startBurst(n.name, size.start, portablePod)
      const out = res[n.label]
      out.s50.push(percentile(b.lat, 50))
      out.s99.push(percentile(b.lat, 99))
      if (r === 0) out.pod = (await cluster.core.listNamespacedPod({namespace: b.nsName})).items[0]
      if (r === size.repeats - 1) {
        await sleep(size.settleMs)
        out.memory = await n.memory()
      }
      const d = await deleteAll(b.nsName, b.obs, size.start)
      out.d50.push(percentile(d, 50))
      out.d99.push(percentile(d, 99))
      b.obs.stop()
      await dropNamespace(b.nsName)
    }
  }
  return {
    ...Object.fromEntries(
      Object.entries(res).map(([label, v]) => [label, {s50: median(v.s50), s99: median(v.s99), cold99: v.s99[0], d50: median(v.d50), d99: median(v.d99), memory: v.memory, pod: v.pod}]),
    ),
    quietWaits,
  }
}

/** The rows of alternateBursts' quiet waits: how long the machine stayed busy after each node's bursts. */
function quietWaitRows(scenario, quietWaits) {
  for (const [label, ms] of Object.entries(quietWaits)) row(scenario, `max after ${label}`, ms, 'ms')
}

/** A node that came up in another mode than asked (the host allowed less): a note, not a figure under the wrong name. */
class ModeFallback extends Error {}

/**
 * A vnode node in one of the modes of modes.mjs, checked to be in it (a node
 * that fell back would measure plain under another name). The default node
 * is whatever the host gives; a note says what that was.
 */
async function modeNode(name, mode) {
  const n = startVnode(cluster, name, ['--pods', String(size.start + 10), ...Modes[mode]])
  await n.ready().catch(async (error) => {
    await n.stop()
    // `up` refuses a mode the host does not allow (--sandbox namespaces, --pod-network on) with its reason on stderr.
    throw mode === 'plain' || mode.startsWith('default') ? error : new ModeFallback(error.message.trim().split('\n').at(-1))
  })
  const {labels = {}, annotations = {}} = (await cluster.core.readNode({name})).metadata
  const sandboxed = labels[ModeLabels.sandbox] === 'namespaces'
  const cgroups = labels[ModeLabels.cgroups]
  if (mode.startsWith('default')) {
    const network = annotations[ModeLabels.podNetwork]
    const said = `sandbox ${labels[ModeLabels.sandbox]}, cgroups ${cgroups}, pod network ${network === 'pod' ? 'on' : `off (${network ?? 'not said'})`}`
    if (!noteRows.some((r) => r.metric === `${mode} mode` && r.value === said)) noteRows.push({scenario: 'note', metric: `${mode} mode`, value: said, unit: ''})
    return {label: mode, name, node: n, cgroups, memory: async () => memoryOf(vnodeRuntimePids(n.child.pid))}
  }
  const flag = (f) => Modes[mode][Modes[mode].indexOf(f) + 1]
  if ((flag('--sandbox') === 'namespaces') !== sandboxed || (flag('--cgroups') !== 'none') !== (cgroups !== undefined && cgroups !== 'none')) {
    await n.stop()
    throw new ModeFallback(`node ${name} came up with sandbox=${labels[ModeLabels.sandbox]} cgroups=${cgroups}`)
  }
  return {label: mode, name, node: n, cgroups, memory: async () => memoryOf(vnodeRuntimePids(n.child.pid))}
}

/** The pod network is in effect when a pod's IP is its own, not the node's. */
const ownPodIp = (pod) => !!pod?.status?.podIP && pod.status.podIP !== pod.status.hostIP

const mib = (bytes) => bytes / 2 ** 20

function memoryRows(scenario, m, base, baseLabel) {
  row(scenario, 'rss', mib(m.rssBytes), 'MiB')
  row(scenario, 'pss', mib(m.pssBytes), 'MiB')
  row(scenario, 'processes', m.processes, 'count')
  if (base) {
    row(scenario, `rss/${baseLabel}`, m.rssBytes / base.rssBytes, 'ratio')
    row(scenario, `pss/${baseLabel}`, m.pssBytes / base.pssBytes, 'ratio')
  }
}

/**
 * The burst on vnode's modes beside its plain mode, alternating in one run:
 * what the sandbox, cgroups and the pod network each cost. The pod network
 * runs in the sandbox, so it is also given against the sandbox alone.
 */
async function compareModes(asked) {
  const modes = []
  for (const m of asked) {
    const why = modeUnavailable(m)
    if (why) skip(`start-${size.start}-${m}`, why)
    else modes.push(m)
  }
  if (modes.length === 0) return
  if (modes.includes('network') && !modes.includes('sandbox')) modes.unshift('sandbox')
  const nodes = []
  try {
    nodes.push(await modeNode('mode-plain', 'plain'))
    for (const m of modes) {
      const n = await modeNode(`mode-${m}`, m).catch((error) => {
        if (!(error instanceof ModeFallback)) throw error
        skip(`start-${size.start}-${m}`, error.message)
      })
      if (n) nodes.push(n)
    }
    if (modes.includes('network') && !nodes.some((n) => n.label === 'sandbox'))
      nodes.splice(
        nodes.findIndex((n) => n.label === 'network'),
        1,
      )
    modes.splice(0, modes.length, ...nodes.slice(1).map((n) => n.label))
    if (modes.length === 0) return
    const res = await alternateBursts(nodes)
    quietWaitRows(`quiet-wait-${size.start}-modes`, res.quietWaits)
    if (res.network && !ownPodIp(res.network.pod)) throw new Error(`mode-network: pod ${res.network.pod?.metadata.name} has the node's address ${res.network.pod?.status?.podIP}`)
    for (const m of ['plain', ...modes]) {
      const s = `start-${size.start}-${m}`
      row(s, 'p50', res[m].s50, 'ms')
      row(s, 'p99', res[m].s99, 'ms')
      row(s, 'p99 cold', res[m].cold99, 'ms')
      if (m !== 'plain') {
        row(s, 'p50/plain', res[m].s50 / res.plain.s50, 'ratio')
        row(s, 'p99/plain', res[m].s99 / res.plain.s99, 'ratio')
        row(s, 'p99 cold/plain', res[m].cold99 / res.plain.cold99, 'ratio')
      }
      if (m === 'network') row(s, 'p99/sandbox', res[m].s99 / res.sandbox.s99, 'ratio')
      if (m === 'default' && res['default-host-network']) {
        row(s, 'p50/pod-network-off', res[m].s50 / res['default-host-network'].s50, 'ratio')
        row(s, 'p99/pod-network-off', res[m].s99 / res['default-host-network'].s99, 'ratio')
      }
      if (m === 'sandbox' && res['sandbox-bare']) {
        row(s, 'p50/sandbox-bare', res[m].s50 / res['sandbox-bare'].s50, 'ratio')
        row(s, 'p99/sandbox-bare', res[m].s99 / res['sandbox-bare'].s99, 'ratio')
      }
      const d = `delete-burst-${size.start}-${m}`
      row(d, 'p50', res[m].d50, 'ms')
      row(d, 'p99', res[m].d99, 'ms')
      if (m !== 'plain') row(d, 'p99/plain', res[m].d99 / res.plain.d99, 'ratio')
      memoryRows(`node-${size.start}-pods-${m}`, res[m].memory, m === 'plain' ? undefined : res.plain.memory, 'plain')
    }
    if (modes.includes('cgroups')) process.stdout.write(`${''.padEnd(24)} (cgroups ${nodes.find((n) => n.label === 'cgroups').cgroups})\n`)
  } finally {
    for (const n of nodes) await n.node.stop()
  }
}

/**
 * The reference kubelet (containerd, runc, the CNI bridge) in this run's
 * cluster, beside vnode plain and vnode as users run it (no mode flag: on this
 * host, as root, the sandbox, cgroups and the pod network): the same pods,
 * the same bursts, alternating; vnode's figures as ratios to the kubelet's.
 */
async function compareKubelet() {
  const why = await referenceUnavailable(log)
  if (why) return skip('kubelet', `the reference kubelet cannot run here: ${why}`)
  let ref
  try {
    ref = await startReference(cluster, 'bench-kubelet', log)
  } catch (error) {
    return skip('kubelet', `the reference kubelet did not start: ${error.message.split('\n')[0]}`)
  }
  const stopRef = async () => {
    const left = await ref.stop()
    if (left.length > 0) {
      noteRows.push({scenario: 'note', metric: 'left behind', value: `the reference kubelet: ${left.join(', ')}`, unit: ''})
      process.exitCode = 1
    }
  }
  cleanups.push(stopRef)
  const nodes = [{label: 'kubelet', name: ref.name, memory: () => ref.memory()}]
  try {
    nodes.push(await modeNode('kl-plain', 'plain'))
    nodes.push(await modeNode('kl-default', 'default'))
    const res = await alternateBursts(nodes)
    quietWaitRows(`quiet-wait-${size.start}-kubelet`, res.quietWaits)
    const k = res.kubelet
    row(`kubelet-start-${size.start}`, 'p50', k.s50, 'ms')
    row(`kubelet-start-${size.start}`, 'p99', k.s99, 'ms')
    row(`kubelet-start-${size.start}`, 'p99 cold', k.cold99, 'ms')
    row(`kubelet-delete-burst-${size.start}`, 'p50', k.d50, 'ms')
    row(`kubelet-delete-burst-${size.start}`, 'p99', k.d99, 'ms')
    memoryRows(`kubelet-node-${size.start}-pods`, k.memory)
    for (const m of nodes.slice(1).map((n) => n.label)) {
      const s = `kubelet-start-${size.start}-vnode-${m}`
      row(s, 'p50', res[m].s50, 'ms')
      row(s, 'p99', res[m].s99, 'ms')
      row(s, 'p50/kubelet', res[m].s50 / k.s50, 'ratio')
      row(s, 'p99/kubelet', res[m].s99 / k.s99, 'ratio')
      row(s, 'p99 cold', res[m].cold99, 'ms')
      row(s, 'p99 cold/kubelet', res[m].cold99 / k.cold99, 'ratio')
      const d = `kubelet-delete-burst-${size.start}-vnode-${m}`
      row(d, 'p50', res[m].d50, 'ms')
      row(d, 'p99', res[m].d99, 'ms')
      row(d, 'p99/kubelet', res[m].d99 / k.d99, 'ratio')
      memoryRows(`kubelet-node-${size.start}-pods-vnode-${m}`, res[m].memory, k.memory, 'kubelet')
    }
  } finally {
    for (const n of nodes.slice(1)) await n.node.stop()
    await stopRef()
  }
}

/** A free TCP port on host. */
function freePort(host = '0.0.0.0') {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, host, () => {
      const {port} = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** How long one kubectl command takes, start to exit (ms); a failure stops the scenario. */
async function timedKubectl(kubectl, args) {
  const t0 = performance.now()
  await new Promise((resolve, reject) =>
    execFile(kubectl, ['--kubeconfig', cluster.kubeconfig, ...args], {timeout: 30_000}, (error, stdout, stderr) =>
      error ? reject(new Error(`kubectl ${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout),
    ),
  )
  return performance.now() - t0
}

/**
 * `kubectl logs` and `kubectl exec` through a relay pod (`up --relay on`,
 * the relay on a second node) beside the same on a direct node, one of
 * each in turn, in the same run: what the relay adds to a user's command.
 */
async function compareRelay() {
  const why = relayUnavailable()
  if (why) return skip('relay', why)
  const {findBinaries} = await import('../dist/cluster/binaries.js')
  const kubectl = findBinaries().kubectl
  const hostLabel = 'vnode.dev/bench-relay-host=true'
  const [relayPort, tunnelPort] = [await freePort(), await freePort('127.0.0.1')]
  const nodes = [
    startVnode(cluster, 'relay-host', ['--sandbox', 'namespaces', '--no-default-taint', '--label', hostLabel, '--relay', 'off']),
    startVnode(cluster, 'relay-direct', [...Modes.plain, '--relay', 'off']),
    startVnode(cluster, 'relay-relayed', [
      ...Modes.plain,
      '--relay',
      'on',
      '--relay-namespace',
      'vnode-bench-relay',
      '--relay-port',
      String(relayPort),
      '--relay-tunnel-port',
      String(tunnelPort),
      '--relay-node-selector',
      hostLabel,
    ]),
  ]
  try {
    for (const n of nodes) await n.ready(120_000)
    const nsName = await namespace()
    const obs = await podObserver(cluster.kc, nsName)
    const app = {containers: [{name: 'c', image: 'busybox', command: ['sh', '-c', 'echo relay bench; exec sleep 3600']}]}
    for (const [pod, node] of [
      ['direct', 'relay-direct'],
      ['relayed', 'relay-relayed'],
    ]) {
      const body = sleeperPod(pod, node, app)
      body.spec.terminationGracePeriodSeconds = 2
      await cluster.core.createNamespacedPod({namespace: nsName, body})
    }
    await waitUntil(() => obs.started.size >= 2, 'the relay bench pods running', 60_000)
    obs.stop()
    const lat = {logs: {direct: [], relayed: []}, exec: {direct: [], relayed: []}}
    // One unmeasured round first: connections and the relay's tunnels warm, as after any first use.
    for (let i = -1; i < size.relayRequests; i++) {
      for (const pod of ['direct', 'relayed']) {
        const logs = await timedKubectl(kubectl, ['-n', nsName, 'logs', pod, '--tail', '1'])
        const exec = await timedKubectl(kubectl, ['-n', nsName, 'exec', pod, '--', 'true'])
        if (i < 0) continue
        lat.logs[pod].push(logs)
        lat.exec[pod].push(exec)
      }
    }
    for (const verb of ['logs', 'exec']) {
      const [d, r] = [lat[verb].direct, lat[verb].relayed]
      row(`kubectl-${verb}-direct`, 'p50', percentile(d, 50), 'ms')
      row(`kubectl-${verb}-direct`, 'p99', percentile(d, 99), 'ms')
      row(`kubectl-${verb}-relay`, 'p50', percentile(r, 50), 'ms')
      row(`kubectl-${verb}-relay`, 'p99', percentile(r, 99), 'ms')
      row(`kubectl-${verb}-relay`, 'p50/direct', percentile(r, 50) / percentile(d, 50), 'ratio')
    }
    await dropNamespace(nsName)
  } finally {
    // The relayed node deletes its relay pod and ConfigMap when it stops.
    for (const n of nodes.reverse()) await n.stop()
  }
}

try {
  let vn
  const node = async () => {
    if (!vn) {
      vn = startVnode(cluster, 'bench-node', ['--pods', String(size.start + 10), ...Modes.plain])
      await vn.ready()
    }
    return vn
  }

  // 1 + 2 + 4. Start latency of the plain node against the floor (alternating, median of repeats), and delete latency.
  if (want('start')) {
    await node()
    await cluster.core.createNode({body: {metadata: {name: 'floor-node'}}})
    const floor = await startFloor(cluster.kc, 'floor-node')
    const v50 = [],
      v90 = [],
      v99 = [],
      f50 = [],
      f99 = [],
      d50 = [],
      d99 = []
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

  // The same bursts on vnode's modes beside its plain mode, and beside the reference kubelet.
  // walls: the sandbox with its writable layers and hidden paths beside the sandbox without them.
  // default: the node as users run it, beside itself with --pod-network off.
  const modes = [
    ...(want('walls') ? ['sandbox-bare'] : []),
    ...['sandbox', 'cgroups', 'network', 'default-host-network', 'default'].filter((m) => want(m) || (m === 'sandbox' && want('walls')) || (m === 'default-host-network' && want('default'))),
  ]
  if (modes.length > 0) await compareModes(modes).catch(scenarioFailed(modes.join(',')))
  if (want('kubelet')) await compareKubelet().catch(scenarioFailed('kubelet'))
  if (want('relay')) await compareRelay().catch(scenarioFailed('relay'))

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
        containers: [
          {name: 'c', image: 'sleep', command: ['sleep', '3600'], env: [{name: 'K', valueFrom: {configMapKeyRef: {name: 'shared', key: 'k'}}}], volumeMounts: [{name: 'cfg', mountPath: '/cfg'}]},
        ],
      },
    })
  }
  await vn?.stop()

  // 3. Throughput, default QPS/burst and unthrottled.
  if (want('throughput')) {
    for (const [label, args] of [
      ['qps50', []],
      ['unthrottled', ['--kube-api-qps', '0']],
    ]) {
      const tp = startVnode(cluster, `tp-${label}`, ['--pods', String(size.throughput + 10), ...Modes.plain, ...args])
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

  // 6. Idle cost with 0..N pods, without and with the dashboard: the node as users run it, and plain beside it.
  const idle = async (n, tui, mode) => {
    const suffix = `${tui ? '-tui' : ''}${mode === 'plain' ? '-plain' : ''}`
    const name = `idle-${n}${suffix}`
    const args = ['--pods', String(n + 10), ...Modes[mode]]
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
    const scenario = `idle-${n}-pods${suffix}`
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
  if (want('idle')) {
    for (const n of size.idlePodsDefault) await idle(n, false, 'default')
    for (const n of size.idlePods) await idle(n, false, 'plain')
  }
  if (want('tui')) for (const n of size.tuiPods) await idle(n, true, 'default')

  // 7. Scale: N nodes in one process.
  if (want('scale')) {
    const sc = startVnode(cluster, 'scale', ['--nodes', String(size.scaleNodes), '--pods', String(size.scalePods + 10), ...Modes.plain])
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
  process.off('SIGINT', interrupted)
  await stopEverything()
}

const kind = runKind({quick, only, startPods: startPodsArg > 0})
const out = join(root, 'bench', ResultsFiles[kind])
const allNotes = [...noteRows, ...notes.map((n) => ({scenario: 'note', metric: 'aborted', value: n, unit: ''}))]
const runRow = {scenario: 'run', metric: kind, value: process.argv.slice(2).join(' '), unit: '', size}
const goalRows = judge(rows, allNotes, size)
for (const g of goalRows) process.stdout.write(`goal ${g.value.padEnd(12)} ${g.metric}${g.unit ? `: ${g.unit}` : ''}\n`)
writeFileSync(out, `${JSON.stringify([runRow, ...rows, ...goalRows, ...allNotes], null, 2)}\n`)
if (notes.length) process.stderr.write(`${notes.join('\n')}\n`)
process.stdout.write(`\nwrote ${out}\n`)
const unmet = goalRows.filter((g) => g.value !== 'met')
if (strict && unmet.length > 0) {
  process.stderr.write(`bench: --strict: ${unmet.length} of ${goalRows.length} goals not met\n`)
  process.exitCode = 1
}
