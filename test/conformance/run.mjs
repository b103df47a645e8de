// `npm run conformance`: the corpus on a vnode node and on the reference
// kubelet node of one local cluster, side by side, compared field by field.
// Writes a Markdown report and JSON, and prints a last line
//   conformance: N/M specs identical, K documented differences
// Exit 0 only when every difference is a documented one.
import {spawn} from 'node:child_process'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {
  compareEvents,
  compareTimelines,
  compareTimes,
  DefaultGoneToleranceMs,
  DefaultSampleSeconds,
  DefaultStartToleranceMs,
  DefaultTimingToleranceMs,
  documented,
  eventSequence,
  normalisePod,
} from './compare.mjs'
import {corpus, Fixtures} from './corpus.mjs'
import {vnodeImageMap} from './images.mjs'
import {conformanceDir, repoRoot} from './paths.mjs'
import {installPrerequisites, leftovers, missingPrerequisites, startReferenceNode, stopReferenceNode} from './reference-node.mjs'
import {writeReport} from './report.mjs'

/** Seconds each pod is watched before it is deleted (unless its spec deletes it earlier). */
export const DefaultWindowSeconds = 50
/** Pods are created in pairs (one per node) this far apart, so neither node starts a burst. */
export const DefaultStaggerMs = 400
/** Specs run this many at a time: the suite compares semantics, not how a node copes with a crowd (that is `npm run bench`). */
export const DefaultBatchSize = 17
export const DefaultGoneTimeoutMs = 90_000
const Namespaces = {kubelet: 'conformance-kubelet', vnode: 'conformance-vnode'}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const log = (l) => console.error(l)
const cli = join(repoRoot, 'bin', 'kubectl-vnode')

async function freePorts(n) {
  const {freePort} = await import(join(repoRoot, 'dist/common/ports.js'))
  const out = new Set()
  while (out.size < n) out.add(await freePort('0.0.0.0'))
  return [...out]
}

/** `kubectl vnode up` for the corpus: its own state dir, the image map, no TUI. */
async function startVnode(dir, kubeconfig, name) {
  await mkdir(dir, {recursive: true})
  const images = join(dir, 'images.yaml')
  await writeFile(images, vnodeImageMap())
  await mkdir(join(dir, 'state'), {recursive: true})
  const child = spawn(
    process.execPath,
    [cli, 'up', '--name', name, '--kubeconfig', kubeconfig, '--no-tui', '-o', 'json', '--state-dir', join(dir, 'state'), '--port', '0', '--images', images, '--rm'],
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

/** The node picked the pod up when it first wrote its status: the start of the pod's timeline. */
const nodeWrote = (pod) => (pod.status?.conditions ?? []).some((c) => c.type === 'PodReadyToStartContainers') || !!pod.status?.containerStatuses

const anyStarted = (pod) => [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].some((c) => c.state?.running || c.state?.terminated)

/** Post-delete states are placed from this offset on, counted from the delete call. */
export const DeletePhaseOffsetMs = 1_000_000
/** Seconds after the delete call at which both nodes' pods are compared again. */
export const DefaultDeleteSampleSeconds = [1, 3, 6, 10]

/**
 * The pod's states on two clocks. Up to the delete call, from the moment its
 * first container started (or, for a pod whose containers never start, from
 * its node's first status write): how long a node takes to get a container
 * going is measured apart, as running/ready times from creation, and must not
 * shift every later sample; states before that moment are transient on both
 * nodes and are not sampled. From the delete call on, counted from that call
 * (plus DeletePhaseOffsetMs), so termination is compared with termination.
 */
function timelineOf(r, ctx) {
  const created = r.created
  const live = r.states.filter((s) => s.type !== 'DELETED')
  const picked = live.find((s) => anyStarted(s.pod))?.at ?? live.find((s) => nodeWrote(s.pod))?.at ?? created
  const deleted = r.deleted ?? Infinity
  const out = []
  let running, ready, gone, held
  for (const s of r.states) {
    const sinceCreate = s.at - created
    if (s.type === 'DELETED') {
      gone = r.deleted !== undefined ? s.at - r.deleted : undefined
      continue
    }
    const flat = normalisePod(s.pod, ctx)
    const st = s.pod.status ?? {}
    if (running === undefined && (st.containerStatuses ?? []).some((c) => c.state?.running)) running = sinceCreate
    if (ready === undefined && (st.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')) ready = sinceCreate
    if (s.at < deleted) {
      held = flat
      const t = s.at - picked
      if (t < 0) continue
      push(out, t, flat)
    } else {
      // The state that held when the delete was asked for opens the delete phase.
      if (held && !out.some((x) => x.t >= DeletePhaseOffsetMs)) push(out, DeletePhaseOffsetMs, held)
      push(out, DeletePhaseOffsetMs + (s.at - deleted), flat)
    }
  }
  if (held && r.deleted !== undefined && !out.some((x) => x.t >= DeletePhaseOffsetMs)) push(out, DeletePhaseOffsetMs, held)
  return {timeline: out, times: {running, ready, gone}, deleteAt: r.deleted === undefined ? undefined : r.deleted - picked}
}

function push(out, t, flat) {
  const last = out.at(-1)
  if (last && JSON.stringify(last.flat) === JSON.stringify(flat)) return
  out.push({t: Math.max(t, last?.t ?? 0), flat})
}

async function runCorpus({core, k8s, kc, nodes, specs, windowSeconds}) {
  const rec = {kubelet: {pods: {}, events: {}}, vnode: {pods: {}, events: {}}}
  const stops = []
  for (const side of ['kubelet', 'vnode']) stops.push(await record(k8s, kc, Namespaces[side], rec[side]))
  const deletions = []
  const remove = (side, spec) => {
    const r = rec[side].pods[spec.name]
    r.deleted = Date.now()
    const body = spec.gracePeriodSeconds === undefined ? undefined : {gracePeriodSeconds: spec.gracePeriodSeconds}
    return core.deleteNamespacedPod({name: spec.name, namespace: Namespaces[side], body}).catch((e) => log(`delete ${side}/${spec.name}: ${e.message}`))
  }
  for (const spec of specs) {
    for (const side of ['kubelet', 'vnode']) {
      const body = {metadata: {name: spec.name, labels: {spec: spec.name}}, spec: {...spec.spec, nodeName: nodes[side]}}
      const r = (rec[side].pods[spec.name] ??= {states: []})
      r.created = Date.now()
      await core.createNamespacedPod({namespace: Namespaces[side], body}).catch((e) => log(`create ${side}/${spec.name}: ${e.message}`))
      deletions.push(sleep((spec.deleteAfter ?? windowSeconds) * 1000).then(() => remove(side, spec)))
    }
    await sleep(DefaultStaggerMs)
  }
  log(`conformance: ${specs.length} specs created on both nodes; watching for ${windowSeconds} s each`)
  await Promise.all(deletions)
  const deadline = Date.now() + DefaultGoneTimeoutMs
  const allGone = () => ['kubelet', 'vnode'].every((side) => Object.values(rec[side].pods).every((r) => r.states.some((s) => s.type === 'DELETED')))
  while (!allGone() && Date.now() < deadline) await sleep(500)
  await sleep(2000) // the last events of the deletes
  stops.forEach((s) => s())
  return rec
}

async function loadDifferences() {
  return JSON.parse(await readFile(join(conformanceDir, 'differences.json'), 'utf8')).differences
}

function compareSpec(spec, rec, differences, ctx) {
  const sides = {}
  for (const side of ['kubelet', 'vnode']) {
    const r = rec[side].pods[spec.name] ?? {states: [], created: Date.now()}
    sides[side] = {...timelineOf(r, ctx[side]), events: eventSequence(rec[side].events[spec.name] ?? [], ctx[side])}
  }
  // Before the delete: the samples both nodes reached before their delete call. After it: counted from the call,
  // and marked, since termination is where a process node and a container differ most.
  const deleteAt = Math.min(...['kubelet', 'vnode'].map((side) => sides[side].deleteAt ?? Infinity))
  const sampleMs = [...DefaultSampleSeconds.map((s) => s * 1000).filter((t) => t < deleteAt), ...DefaultDeleteSampleSeconds.map((s) => DeletePhaseOffsetMs + s * 1000)]
  const diffs = [
    ...compareTimelines(sides.kubelet.timeline, sides.vnode.timeline, sampleMs, DefaultTimingToleranceMs).map((d) =>
      d.at >= DeletePhaseOffsetMs ? {...d, at: d.at - DeletePhaseOffsetMs, path: `status-deleting ${d.path}`} : {...d, path: `status ${d.path}`},
    ),
    ...compareEvents(sides.kubelet.events, sides.vnode.events),
    ...compareTimes(sides.kubelet.times, sides.vnode.times, {startToleranceMs: DefaultStartToleranceMs, goneToleranceMs: DefaultGoneToleranceMs}),
  ]
  for (const d of diffs) d.documented = documented(differences, spec.name, d.path)?.id
  const verdict = diffs.length === 0 ? 'identical' : diffs.every((d) => d.documented) ? 'documented' : 'different'
  return {name: spec.name, verdict, diffs, kubelet: sides.kubelet, vnode: sides.vnode}
}

/** Compares a recording (also one saved by an earlier run: `--compare recording.json`) and writes the report. */
export async function compareRecording({outDir, nodes, specs, rec, differences, seconds}) {
  const ctx = Object.fromEntries(
    ['kubelet', 'vnode'].map((side) => [
      side,
      {
        names: [
          [Namespaces[side], '<ns>'],
          [nodes[side], '<node>'],
        ],
      },
    ]),
  )
  const results = specs.map((spec) => compareSpec(spec, rec, differences, ctx))
  return writeReport({outDir, results, differences, seconds, nodes})
}

export async function runConformance({outDir = join(repoRoot, '.conformance'), windowSeconds = DefaultWindowSeconds, only} = {}) {
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
  try {
    log('conformance: control plane')
    await execa(process.execPath, [cli, 'cluster', 'up', '--dir', clusterDir, '--port', '0'], {stdio: ['ignore', 'ignore', 'inherit']})
    const kubeconfig = join(clusterDir, 'kubeconfig')
    await startReferenceNode({clusterDir, dir: refDir, name: nodes.kubelet, log})
    log('conformance: vnode')
    vnode = await startVnode(join(dir, 'vnode'), kubeconfig, nodes.vnode)
    const {k8s, kc, core} = await kubeClients(kubeconfig)
    for (const side of ['kubelet', 'vnode']) await prepareNamespace(core, Namespaces[side])
    let specs = corpus(await freePorts(8))
    if (only) specs = specs.filter((s) => only.some((o) => s.name.includes(o)))
    const rec = {kubelet: {pods: {}, events: {}}, vnode: {pods: {}, events: {}}}
    for (let i = 0; i < specs.length; i += DefaultBatchSize) {
      const batch = await runCorpus({core, k8s, kc, nodes, specs: specs.slice(i, i + DefaultBatchSize), windowSeconds})
      for (const side of ['kubelet', 'vnode']) {
        Object.assign(rec[side].pods, batch[side].pods)
        Object.assign(rec[side].events, batch[side].events)
      }
    }
    await mkdir(outDir, {recursive: true})
    await writeFile(join(outDir, 'recording.json'), JSON.stringify({nodes, specs, rec}))
    return compareRecording({outDir, nodes, specs, rec, differences, seconds: Math.round((Date.now() - started) / 1000)})
  } finally {
    await vnode?.stop().catch((e) => log(`vnode stop: ${e.message}`))
    await stopReferenceNode({dir: refDir, log}).catch((e) => log(`reference node stop: ${e.message}`))
    const left = await leftovers(refDir).catch(() => [])
    if (left.length > 0) log(`conformance: the reference node left behind: ${left.join(', ')}`)
    await execa(process.execPath, [cli, 'cluster', 'down', '--dir', clusterDir], {stdio: ['ignore', 'ignore', 'inherit'], reject: false})
    if (!process.env.VNODE_CONFORMANCE_KEEP) await rm(dir, {recursive: true, force: true}).catch(() => undefined)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2)
  const opt = (f) => (args.includes(f) ? args[args.indexOf(f) + 1] : undefined)
  const saved = opt('--compare')
  const run = saved
    ? readFile(saved, 'utf8').then(async (text) => compareRecording({...JSON.parse(text), outDir: opt('--out') ?? join(repoRoot, '.conformance'), differences: await loadDifferences(), seconds: 0}))
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
