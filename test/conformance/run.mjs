// `npm run conformance`: the corpus on a vnode node and on the reference
// kubelet node of one local cluster, side by side, compared field by field.
// Writes a Markdown report and JSON (and recording.json, the raw watch record,
// which `--compare recording.json` compares again), and prints a last line
//   conformance: N/M identical, D identical apart from documented differences (...), F different
// Exit 0 only when every difference is a documented one, every spec ran on both
// nodes, and the host is left as it was found; 2 when the suite cannot run.
import {spawn} from 'node:child_process'
import {mkdir, mkdtemp, readdir, readFile, rm, rmdir, stat, writeFile} from 'node:fs/promises'
import {availableParallelism, tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {compareAll, loadSummary, validateDifferences} from './compare.mjs'
import {corpus, Fixtures} from './corpus.mjs'
import {vnodeImageMap} from './images.mjs'
import {conformanceDir, repoRoot} from './paths.mjs'
import {installPrerequisites, leftovers, missingPrerequisites, startReferenceNode, stopReferenceNode} from './reference-node.mjs'
import {writeReport} from './report.mjs'

/** Seconds each pod is watched before it is deleted (unless its spec deletes it earlier). */
export const DefaultWindowSeconds = 50
/** Pods are created in pairs (one per node) this far apart, so neither node starts a burst. */
export const DefaultStaggerMs = 400
/** At most this many specs live at a time: the suite compares semantics, not how a node copes with a crowd (that is `npm run bench`). */
export const DefaultConcurrentSpecs = 17
export const DefaultGoneTimeoutMs = 90_000
/** The corpus's ports are picked from this many ports below the ephemeral range. */
export const DefaultPortSpan = 8_000
const Namespaces = {kubelet: 'conformance-kubelet', vnode: 'conformance-vnode'}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const log = (l) => console.error(l)
const cli = join(repoRoot, 'bin', 'kubectl-vnode')

/**
 * Ports for the corpus's probe servers and for the probes of ports nobody
 * listens on. On vnode every pod shares the host network, so they are taken
 * below the kernel's ephemeral range (ip_local_port_range): a program that
 * binds port 0 (an API server, a kubelet of another run on this host) never
 * lands there, so a "closed" port stays closed for the whole run.
 */
async function freePorts(n) {
  const {portOr} = await import(join(repoRoot, 'dist/common/ports.js'))
  const range = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '32768 60999')
  const low = Number(range.trim().split(/\s+/)[0]) || 32768
  const from = Math.max(1024, low - DefaultPortSpan)
  // Free when it can be bound on every address and on loopback (portOr gives another port otherwise).
  const free = async (port) => (await portOr(port, '0.0.0.0')) === port && (await portOr(port, '127.0.0.1')) === port
  const out = new Set()
  for (let tries = 0; out.size < n && tries < 1000; tries++) {
    const port = from + Math.floor(Math.random() * (low - from))
    if (!out.has(port) && (await free(port))) out.add(port)
  }
  if (out.size < n) throw new Error(`no ${n} free ports in ${from}-${low - 1}`)
  return [...out]
}

/**
 * `kubectl vnode up` for the corpus: its own state dir, the image map, no TUI.
 * The reference node's directory is hidden from its containers: containerd
 * mounts and unmounts a rootfs there for every container the corpus starts,
 * and vnode binds the host's mounts into each sandbox it sets up, so one that
 * went away between the mount table's read and bwrap's bind failed a start
 * (a StartError seen once, at a restart both nodes made at the same moment).
 * No container of either node needs to see the other's files.
 */
async function startVnode(dir, kubeconfig, name, hide) {
  await mkdir(dir, {recursive: true})
  const images = join(dir, 'images.yaml')
  await writeFile(images, vnodeImageMap())
  await mkdir(join(dir, 'state'), {recursive: true})
  const child = spawn(
    process.execPath,
    [cli, 'up', '--name', name, '--kubeconfig', kubeconfig, '--no-tui', '-o', 'json', '--state-dir', join(dir, 'state'), '--port', '0', '--images', images, '--hide', hide, '--rm'],
    {stdio: ['ignore', 'pipe', 'pipe']},
  )
  const exited = new Promise((r) => child.on('exit', r))
  let out = ''
  child.stderr.on('data', (d) => (out = (out + d).slice(-4000)))
  await new Promise((resolve, reject) => {
    let buf = ''
    child.stdout.on('data', (d) => {
      buf += d
      for (const line of buf.split('\n').slice(0, -1)) if (/"step":"ready"/.test(line)) resolve()
      buf = buf.slice(buf.lastIndexOf('\n') + 1)
    })
    void exited.then(() => reject(new Error(`vnode exited before it was ready: ${out}`)))
    setTimeout(() => reject(new Error('vnode was not ready within 60 s')), 60_000).unref()
  })
  return {
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), 60_000)
      await exited
      clearTimeout(t)
    },
  }
}

async function kubeClients(kubeconfig) {
  const k8s = await import('@kubernetes/client-node')
  const kc = new k8s.KubeConfig()
  kc.loadFromFile(kubeconfig)
  return {k8s, kc, core: kc.makeApiClient(k8s.CoreV1Api)}
}

async function prepareNamespace(core, ns) {
  await core.createNamespace({body: {metadata: {name: ns}}})
  for (const cm of Fixtures.configMaps) await core.createNamespacedConfigMap({namespace: ns, body: cm})
  for (const s of Fixtures.secrets) await core.createNamespacedSecret({namespace: ns, body: s})
  // Pods need the namespace's default ServiceAccount, made by the controller manager.
  for (let i = 0; i < 100; i++) {
    const ok = await core.readNamespacedServiceAccount({name: 'default', namespace: ns}).then(
      () => true,
      () => false,
    )
    if (ok) return
    await sleep(200)
  }
  throw new Error(`no default ServiceAccount in ${ns}`)
}

/** Every pod and event of a namespace through a watch, stamped on arrival. */
async function record(k8s, kc, ns, rec) {
  const watch = new k8s.Watch(kc)
  const controllers = []
  const onPod = (type, pod) => {
    const name = pod.metadata.name
    const r = (rec.pods[name] ??= {states: [], created: undefined})
    r.states.push({at: Date.now(), type, pod})
  }
  const onEvent = (_type, e) => {
    if (e.involvedObject?.kind !== 'Pod') return
    ;(rec.events[e.involvedObject.name] ??= []).push(e)
  }
  controllers.push(await watch.watch(`/api/v1/namespaces/${ns}/pods`, {}, onPod, () => undefined))
  controllers.push(await watch.watch(`/api/v1/namespaces/${ns}/events`, {}, onEvent, () => undefined))
  return () => controllers.forEach((c) => c.abort())
}

/** A slot for each spec that may be live at once: `take` waits for one, `give` frees it. */
function slots(n) {
  let free = n
  const waiting = []
  return {
    take: () => (free > 0 ? (free--, Promise.resolve()) : new Promise((r) => waiting.push(r))),
    give: () => (waiting.length > 0 ? waiting.shift()() : free++),
  }
}

/**
 * Runs the specs on both nodes, at most DefaultConcurrentSpecs of them live
 * at a time: the next spec starts as soon as one is gone from both nodes, so
 * no spec waits for the slowest of a batch. Each spec's pods are created in a
 * pair (one per node), watched for the window, deleted, and followed until
 * they are gone.
 */
async function runCorpus({core, k8s, kc, nodes, specs, windowSeconds}) {
  const rec = {kubelet: {pods: {}, events: {}}, vnode: {pods: {}, events: {}}}
  const stops = []
  for (const side of ['kubelet', 'vnode']) stops.push(await record(k8s, kc, Namespaces[side], rec[side]))
  const remove = async (side, spec) => {
    const r = rec[side].pods[spec.name]
    if (r.createError) return
    // What the containers wrote, read through the API server (the node's log endpoint) before the delete.
    if (spec.logs) r.logs = await containerLogs(core, Namespaces[side], spec)
    r.deleted = Date.now()
    const del = (gracePeriodSeconds) =>
      core
        .deleteNamespacedPod({name: spec.name, namespace: Namespaces[side], body: gracePeriodSeconds === undefined ? undefined : {gracePeriodSeconds}})
        .catch((e) => (r.deleteErrors ??= []).push(e.message))
    await del(spec.gracePeriodSeconds)
    if (spec.forceAfter !== undefined) {
      await sleep(spec.forceAfter * 1000)
      r.forced = Date.now()
      await del(0)
    }
  }
  const gone = (side, spec) => {
    const r = rec[side].pods[spec.name]
    return r.createError || r.states.some((s) => s.type === 'DELETED')
  }
  /** One spec on both nodes, from the creates until both pods are gone (or DefaultGoneTimeoutMs after the deletes). */
  const runSpec = async (spec) => {
    const deletions = []
    for (const side of ['kubelet', 'vnode']) {
      const body = {metadata: {name: spec.name, labels: {spec: spec.name}}, spec: {...spec.spec, nodeName: nodes[side]}}
      const r = (rec[side].pods[spec.name] ??= {states: []})
      r.created = Date.now()
      // A spec the API server refuses is a failed spec, not an empty (and so identical) one.
      await core.createNamespacedPod({namespace: Namespaces[side], body}).catch((e) => {
        r.createError = e.body?.message ?? e.message
        log(`create ${side}/${spec.name}: ${r.createError}`)
      })
      deletions.push(sleep((spec.deleteAfter ?? windowSeconds) * 1000).then(() => remove(side, spec)))
    }
    await Promise.all(deletions)
    const deadline = Date.now() + DefaultGoneTimeoutMs
    while (!['kubelet', 'vnode'].every((side) => gone(side, spec)) && Date.now() < deadline) await sleep(500)
    // A pod still there at the deadline stays without a DELETED state: compare fails it as never gone.
    for (const side of ['kubelet', 'vnode']) if (!gone(side, spec)) log(`conformance: ${side}/${spec.name} still there ${DefaultGoneTimeoutMs / 1000} s after its delete`)
  }
  const live = slots(DefaultConcurrentSpecs)
  const running = []
  for (const [i, spec] of specs.entries()) {
    await live.take()
    running.push(runSpec(spec).finally(live.give))
    if ((i + 1) % DefaultConcurrentSpecs === 0 || i + 1 === specs.length) log(`conformance: ${i + 1}/${specs.length} specs started on both nodes; each watched for ${windowSeconds} s`)
    await sleep(DefaultStaggerMs)
  }
  await Promise.all(running)
  await sleep(2000) // the last events of the deletes
  stops.forEach((s) => s())
  return rec
}

/** The logs of every container a spec names, each as text or {error}. */
async function containerLogs(core, namespace, spec) {
  const out = {}
  for (const container of Object.keys(spec.logs)) {
    out[container] = await core.readNamespacedPodLog({name: spec.name, namespace, container}).then(
      (text) => ({text: String(text)}),
      (e) => ({error: e.body?.message ?? e.message}),
    )
  }
  return out
}

/**
 * What a stopped vnode left running: processes in its cgroup root
 * (`vnode-<node>-<hash>` in each hierarchy), such as a container or a hook a
 * stop did not end. They are killed by pid and their cgroups removed, so the
 * host is left as found, and named, so the run fails.
 */
async function removeVnodeLeftovers(node) {
  const marker = `/vnode-${node}-`
  const left = []
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const cg = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '')
    if (!cg.includes(marker)) continue
    const cmd = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim()
    left.push(`vnode process ${pid} (${cmd.slice(0, 80)})`)
    try {
      process.kill(Number(pid), 'SIGKILL')
    } catch {
      // Gone already.
    }
  }
  if (left.length > 0) await sleep(500)
  for (const h of await readdir('/sys/fs/cgroup').catch(() => [])) {
    // cgroup v2: the root is a directory of the unified hierarchy itself.
    if (h.startsWith(marker.slice(1))) {
      left.push(`vnode cgroup ${h}`)
      await removeCgroupDir(join('/sys/fs/cgroup', h))
      continue
    }
    for (const d of (await readdir(join('/sys/fs/cgroup', h)).catch(() => [])).filter((x) => x.startsWith(marker.slice(1)))) {
      left.push(`vnode cgroup ${h}/${d}`)
      await removeCgroupDir(join('/sys/fs/cgroup', h, d))
    }
  }
  return left
}

/**
 * What a vnode killed at its stop keeps for a later `up` to adopt: its pods'
 * and its warm pool's network namespaces (named in its state dir's network
 * records) and its bridge. They are removed, and named, so the run fails.
 */
export async function removeVnodeNetwork(node, stateDir) {
  const left = []
  for (const kind of ['pods', 'pool']) {
    const dir = join(stateDir, 'network', kind)
    for (const f of (await readdir(dir).catch(() => [])).filter((x) => x.endsWith('.json'))) {
      const record = await readFile(join(dir, f), 'utf8').then(JSON.parse, () => ({}))
      const name = typeof record.netns === 'string' ? record.netns.split('/').pop() : undefined
      if (
        !name ||
        !(await stat(join('/run/netns', name)).then(
          () => true,
          () => false,
        ))
      )
        continue
      left.push(`network namespace ${name}`)
      await execa('ip', ['netns', 'delete', name], {reject: false, stdin: 'ignore'})
    }
  }
  const {bridgeName} = await import(join(repoRoot, 'dist/emulator/runtime/network/config.js'))
  const bridge = bridgeName(node)
  if ((await execa('ip', ['link', 'show', bridge], {reject: false, stdin: 'ignore'})).exitCode === 0) {
    left.push(`bridge ${bridge}`)
    await execa('ip', ['link', 'delete', bridge], {reject: false, stdin: 'ignore'})
  }
  return left
}

/** Removes a cgroup directory, its children first (rmdir: a cgroup's files go with it). */
async function removeCgroupDir(dir) {
  for (const e of await readdir(dir, {withFileTypes: true}).catch(() => [])) if (e.isDirectory()) await removeCgroupDir(join(dir, e.name))
  await rmdir(dir).catch(() => undefined)
}

/** The 1-minute load average, sampled through the run: the timing tolerances scale with it. */
function watchLoad(samples, everyMs = 5_000) {
  const read = () =>
    readFile('/proc/loadavg', 'utf8').then(
      (t) => samples.push({at: Date.now(), load1: Number(t.split(' ')[0])}),
      () => undefined,
    )
  void read()
  const t = setInterval(read, everyMs)
  return () => clearInterval(t)
}

async function loadDifferences() {
  return validateDifferences(JSON.parse(await readFile(join(conformanceDir, 'differences.json'), 'utf8')).differences)
}

/** Compares a recording (also one saved by an earlier run: `--compare recording.json`) and writes the report. */
export async function compareRecording({outDir, nodes, specs, rec, differences, seconds}) {
  const results = compareAll({specs, rec, nodes, namespaces: Namespaces, differences})
  return writeReport({outDir, results, differences, seconds, nodes, load: loadSummary(rec)})
}

/** The --only entries that name no spec of the corpus (each entry matches the specs whose name contains it). */
export function unknownSpecs(only) {
  const names = corpus(Array.from({length: 8}, (_, i) => 20_000 + i)).map((s) => s.name)
  return only.filter((o) => !names.some((n) => n.includes(o)))
}

export async function runConformance({outDir = join(repoRoot, '.conformance'), windowSeconds = DefaultWindowSeconds, only} = {}) {
  const unknown = only ? unknownSpecs(only) : []
  if (unknown.length > 0) throw new Error(`--only ${unknown.join(',')}: no spec of the corpus has that in its name`)
  await installPrerequisites(log)
  const missing = missingPrerequisites()
  if (missing.length > 0) throw new Error(`the reference node cannot run here: missing ${missing.join(', ')}`)
  const differences = await loadDifferences()
  const dir = await mkdtemp(join(tmpdir(), 'vnode-conformance-'))
  const clusterDir = join(dir, 'cluster')
  const suffix = dir
    .slice(-6)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, 'x')
  const nodes = {kubelet: `conformance-kubelet-${suffix}`, vnode: `conformance-vnode-${suffix}`}
  const refDir = join(dir, 'reference')
  let vnode
  const started = Date.now()
  // The KUBE-* iptables lines the reference kubelet leaves: taken before it starts, deleted once it is down.
  const {restoreFirewall, snapshotFirewall} = await import(join(repoRoot, 'dist/common/host-firewall.js'))
  const firewall = await snapshotFirewall()
  let summary
  try {
    log('conformance: control plane')
    await execa(process.execPath, [cli, 'cluster', 'up', '--dir', clusterDir, '--port', '0'], {stdio: ['ignore', 'ignore', 'inherit']})
    const kubeconfig = join(clusterDir, 'kubeconfig')
    await startReferenceNode({clusterDir, dir: refDir, name: nodes.kubelet, log})
    log('conformance: vnode')
    vnode = await startVnode(join(dir, 'vnode'), kubeconfig, nodes.vnode, refDir)
    const {k8s, kc, core} = await kubeClients(kubeconfig)
    for (const side of ['kubelet', 'vnode']) await prepareNamespace(core, Namespaces[side])
    let specs = corpus(await freePorts(8))
    if (only) specs = specs.filter((s) => only.some((o) => s.name.includes(o)))
    const load = []
    const stopLoad = watchLoad(load)
    const rec = {...(await runCorpus({core, k8s, kc, nodes, specs, windowSeconds})), load, cpus: availableParallelism()}
    stopLoad()
    await mkdir(outDir, {recursive: true})
    const seconds = Math.round((Date.now() - started) / 1000)
    await writeFile(join(outDir, 'recording.json'), JSON.stringify({nodes, specs, rec, seconds}))
    summary = await compareRecording({outDir, nodes, specs, rec, differences, seconds})
    return summary
  } finally {
    await vnode?.stop().catch((e) => log(`vnode stop: ${e.message}`))
    const vnodeLeft = await removeVnodeLeftovers(nodes.vnode).catch((e) => [`(vnode leftovers not checked: ${e.message})`])
    vnodeLeft.push(...(await removeVnodeNetwork(nodes.vnode, join(dir, 'vnode', 'state')).catch((e) => [`(vnode network not checked: ${e.message})`])))
    await stopReferenceNode({dir: refDir, log}).catch((e) => log(`reference node stop: ${e.message}`))
    const left = [...vnodeLeft, ...(await leftovers(refDir).catch((e) => [`(not checked: ${e.message})`]))]
    await execa(process.execPath, [cli, 'cluster', 'down', '--dir', clusterDir], {stdio: ['ignore', 'ignore', 'inherit'], reject: false})
    const firewallLeft = await restoreFirewall(firewall, (l) => log(`conformance: ${l}`))
    for (const [key, ls] of Object.entries(firewallLeft)) left.push(...ls.map((l) => `${key}: ${l}`))
    // A run that leaves the host changed fails, whatever it compared.
    if (left.length > 0) {
      log(`conformance: left behind: ${left.join(', ')}`)
      if (summary) summary.ok = false
    }
    if (!process.env.VNODE_CONFORMANCE_KEEP) await rm(dir, {recursive: true, force: true}).catch(() => undefined)
  }
}

/** What `run.mjs --help` prints. */
export const Usage = `usage: node test/conformance/run.mjs [--only SPEC,...] [--window SECONDS] [--out DIR]
       node test/conformance/run.mjs --compare RECORDING.json [--out DIR]
Runs the corpus on a vnode node and on the reference kubelet of one local cluster (as root; about
5 minutes), or compares a saved recording again. Writes the report to DIR (default .conformance/).`

/** The flags run.mjs takes, each with a value: anything else is refused before a run starts. */
export const Flags = ['--only', '--window', '--out', '--compare']

/** The options of the command line, or the error that refuses it (a run is minutes of work: a typo must not start one). */
export function parseArgs(args) {
  if (args.includes('--help') || args.includes('-h')) return {help: true}
  const opts = {}
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]]
    if (!Flags.includes(flag)) return {error: `unknown argument ${flag}`}
    if (value === undefined || value.startsWith('--')) return {error: `${flag} needs a value`}
    opts[flag.slice(2)] = value
  }
  if (opts.window !== undefined && !(Number(opts.window) > 0)) return {error: `--window ${opts.window}: must be a number of seconds above 0`}
  return {opts}
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const parsed = parseArgs(process.argv.slice(2))
  if (parsed.help) {
    console.log(Usage)
    process.exit(0)
  }
  if (parsed.error) {
    console.error(`error: ${parsed.error}\n${Usage}`)
    process.exit(2)
  }
  const opt = (f) => parsed.opts[f.slice(2)]
  const saved = opt('--compare')
  const run = saved
    ? readFile(saved, 'utf8').then(async (text) => compareRecording({seconds: 0, ...JSON.parse(text), outDir: opt('--out') ?? join(repoRoot, '.conformance'), differences: await loadDifferences()}))
    : runConformance({
        outDir: opt('--out'),
        windowSeconds: opt('--window') ? Number(opt('--window')) : undefined,
        only: opt('--only')?.split(','),
      })
  run.then(
    (s) => {
      console.log(s.line)
      process.exit(s.ok ? 0 : 1)
    },
    (e) => {
      console.error(`error: ${e.message}`)
      process.exit(2)
    },
  )
}
