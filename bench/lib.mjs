// Shared pieces of the benchmark: a control plane, vnode processes, pod
// factories and statistics. Everything is measured in one run, so ratios
// compare like with like on a shared, noisy machine.
import {execFileSync, spawn} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'
import * as k8s from '@kubernetes/client-node'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..')
export const cli = join(root, 'bin', 'kubectl-vnode')
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
export const CLK_TCK = 100

export function percentile(values, p) {
  if (values.length === 0) return NaN
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
}

export function median(values) {
  return percentile(values, 50)
}

/** A control plane of our own for the run, torn down at the end. */
export function startCluster() {
  const dir = mkdtempSync(join(tmpdir(), 'vnode-bench-'))
  execFileSync(process.execPath, [cli, 'cluster', 'build'], {stdio: ['ignore', 'ignore', 'inherit']})
  execFileSync(process.execPath, [cli, 'cluster', 'up', '--dir', join(dir, 'cluster'), '--port', '0'], {stdio: ['ignore', 'ignore', 'inherit']})
  const kubeconfig = join(dir, 'cluster', 'kubeconfig')
  const kc = new k8s.KubeConfig()
  kc.loadFromFile(kubeconfig)
  return {
    dir,
    kubeconfig,
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    /** Stops the control plane; the run's directory stays (for a look at what is left in it). */
    down() {
      execFileSync(process.execPath, [cli, 'cluster', 'down', '--dir', join(dir, 'cluster')], {stdio: 'ignore'})
    },
    stop() {
      this.down()
      rmSync(dir, {recursive: true, force: true})
    },
  }
}

/** CPU seconds and resident memory of a process, from /proc. */
export function procUsage(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
  return {cpuSeconds: (Number(f[11]) + Number(f[12])) / CLK_TCK, rssBytes: rss}
}

const started = new Set()
/** Every vnode node this run started ({name, stateDir}), for the check that none left anything behind. */
export const nodesStarted = []

function recordNodes(name, stateDir, args) {
  const i = args.indexOf('--nodes')
  const n = i >= 0 ? Number(args[i + 1]) : 1
  // `up --nodes N` names its nodes <name>-<i>, each with the state dir <state-dir>/<name>-<i>.
  if (n > 1) for (let k = 0; k < n; k++) nodesStarted.push({name: `${name}-${k}`, stateDir: join(stateDir, `${name}-${k}`)})
  else nodesStarted.push({name, stateDir})
}

/** Stops every vnode this run started and has not stopped (a failed scenario must leave no process). */
export async function stopAllVnodes() {
  await Promise.all([...started].map((n) => n.stop()))
}

/** The plugin's argv for `kubectl vnode up` of a bench node: the file itself, as kubectl runs it (its first line chooses node's environment). */
function upArgv(cluster, name, stateDir, args) {
  return ['up', '--name', name, '--port', '0', '--state-dir', stateDir, '--kubeconfig', cluster.kubeconfig, ...args]
}

/**
 * How a bench node is started: the plugin file, as kubectl runs it. With BENCH_CPU_PROF=<dir>, node itself runs
 * the file with --cpu-prof (node refuses it in NODE_OPTIONS), in the environment the file's launcher line gives it.
 */
function upCommand(argv, env = process.env) {
  const dir = process.env.BENCH_CPU_PROF
  if (!dir) return {file: cli, args: argv, env}
  return {file: process.execPath, args: ['--cpu-prof', `--cpu-prof-dir=${dir}`, cli, ...argv], env: {...env, MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? '1'}}
}

/**
 * `kubectl vnode up` with its dashboard, on a pseudo-terminal of 120x40 (what
 * a user sees); only CPU and memory are read from it.
 */
export async function startVnodeTui(cluster, name, args = []) {
  const {spawn: spawnPty} = await import('@lydell/node-pty')
  const stateDir = join(cluster.dir, 'nodes', name)
  recordNodes(name, stateDir, args)
  const env = {...process.env, TERM: 'xterm-256color'}
  delete env.CI
  const up = upCommand(upArgv(cluster, name, stateDir, args), env)
  const term = spawnPty(up.file, up.args, {cols: 120, rows: 40, env: up.env})
  let screen = ''
  term.onData((d) => (screen = (screen + d).slice(-20_000)))
  const exited = new Promise((r) => term.onExit(({exitCode}) => r(exitCode)))
  const node = {
    name,
    async ready(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs
      while (!/Ready=True/.test(screen)) {
        if (Date.now() > deadline) throw new Error(`vnode ${name} (dashboard) not ready: ${screen.slice(-500)}`)
        await sleep(100)
      }
    },
    usage: () => procUsage(term.pid),
    async stop() {
      started.delete(node)
      try {
        process.kill(term.pid, 'SIGTERM')
      } catch {
        /* gone */
      }
      return exited
    },
  }
  started.add(node)
  return node
}

/** `kubectl vnode up` as a separate process; its JSON lines are kept. BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each. */
export function startVnode(cluster, name, args = []) {
  const stateDir = join(cluster.dir, 'nodes', name)
  recordNodes(name, stateDir, args)
  // The flags are the caller's: a mode of modes.mjs, or none for the node as users run it.
  const up = upCommand(upArgv(cluster, name, stateDir, ['--no-tui', '-o', 'json', ...args]))
  const child = spawn(up.file, up.args, {stdio: ['ignore', 'pipe', 'pipe'], env: up.env})
  const lines = []
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      try {
        lines.push(JSON.parse(buf.slice(0, i)))
      } catch {
        /* not JSON */
      }
      buf = buf.slice(i + 1)
    }
  })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise((r) => child.on('exit', (code) => r(code)))
  const node = {
    name,
    child,
    lines,
    stateDir,
    async ready(timeoutMs = 60_000, nodes = 1) {
      const deadline = Date.now() + timeoutMs
      while (lines.filter((l) => l.kind === 'step' && l.step === 'ready').length < nodes) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`vnode ${name} not ready: ${stderr}`)
        await sleep(50)
      }
    },
    /** The request counters, asked for with SIGUSR2. */
    async stats() {
      const before = lines.filter((l) => l.kind === 'stats').length
      child.kill('SIGUSR2')
      const deadline = Date.now() + 5000
      while (lines.filter((l) => l.kind === 'stats').length === before) {
        if (Date.now() > deadline) throw new Error('no stats line')
        await sleep(20)
      }
      return lines.filter((l) => l.kind === 'stats').at(-1).summary
    },
    /** A stats line of every node (with --nodes N). */
    async statsAll(n) {
      const before = lines.filter((l) => l.kind === 'stats').length
      child.kill('SIGUSR2')
      const deadline = Date.now() + 5000
      while (lines.filter((l) => l.kind === 'stats').length < before + n) {
        if (Date.now() > deadline) throw new Error('missing stats lines')
        await sleep(20)
      }
      return lines
        .filter((l) => l.kind === 'stats')
        .slice(-n)
        .map((l) => l.summary)
    },
    usage: () => procUsage(child.pid),
    async stop() {
      started.delete(node)
      if (child.exitCode === null) child.kill('SIGTERM')
      return exited
    },
  }
  started.add(node)
  return node
}

/**
 * The pod the floor can run too: one sleep, nothing to mount. (A pod with the
 * default service account token costs one TokenRequest more per start: the
 * start-token scenario measures it.)
 */
export function sleeperPod(name, nodeName, extra = {}) {
  return {
    metadata: {name, labels: {bench: 'true'}},
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 30,
      tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}],
      containers: [{name: 'c', image: 'sleep', command: ['sleep', '3600']}],
      ...extra,
    },
  }
}

/**
 * Watches the pods of a namespace and records, per pod, when all containers
 * were first seen started and when the pod was first seen gone. The API
 * server closes a watch whose reader falls behind (as this one can in a
 * burst of 500 pods on 2 cores): it is reopened from the last
 * resourceVersion seen, so no event is lost.
 */
const observers = new Set()

/** Stops every pod observer still open (a watch reopened against a stopped control plane would keep the run from ending). */
export function stopAllObservers() {
  for (const o of [...observers]) o.stop()
}

export async function podObserver(kc, namespace) {
  const started = new Map()
  const gone = new Map()
  const deleting = new Map()
  const watch = new k8s.Watch(kc)
  let rv
  let stopped = false
  let ctl
  const onEvent = (type, pod) => {
    if (pod?.metadata?.resourceVersion) rv = pod.metadata.resourceVersion
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return
    const name = pod.metadata.name
    const now = performance.now()
    if (type === 'DELETED') {
      if (!gone.has(name)) gone.set(name, now)
      return
    }
    if (pod.metadata.deletionTimestamp && !deleting.has(name)) deleting.set(name, now)
    const cs = pod.status?.containerStatuses ?? []
    if (!started.has(name) && cs.length > 0 && cs.every((c) => c.state?.running)) started.set(name, now)
  }
  const open = async () => {
    if (stopped) return
    ctl = await watch.watch(`/api/v1/namespaces/${namespace}/pods`, {allowWatchBookmarks: true, ...(rv ? {resourceVersion: rv} : {})}, onEvent, () => {
      if (!stopped) setTimeout(() => void open().catch(() => setTimeout(() => void open(), 500)), 100)
    })
  }
  await open()
  const observer = {
    started,
    gone,
    deleting,
    stop: () => {
      stopped = true
      observers.delete(observer)
      ctl?.abort()
    },
  }
  observers.add(observer)
  return observer
}

export async function waitUntil(fn, what, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/** The API server's own request counts (apiserver_request_total), keyed "VERB resource[/subresource]". */
export async function apiserverRequests(kc) {
  const https = await import('node:https')
  const opts = {}
  await kc.applyToHTTPSOptions(opts)
  const url = new URL(`${kc.getCurrentCluster().server}/metrics`)
  const text = await new Promise((resolve, reject) => {
    https
      .get({...opts, hostname: url.hostname, port: url.port, path: url.pathname}, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d) => (body += d))
        res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`metrics: HTTP ${res.statusCode}`))))
      })
      .on('error', reject)
  })
  const counts = new Map()
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]))
    const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`
    counts.set(key, (counts.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)))
  }
  return counts
}

/** All cores' idle and total time so far, in clock ticks (/proc/stat's first line). */
function cpuTicks() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1, 9).map(Number)
  return {idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0)}
}

/** The share of all cores' time a quiet machine leaves idle (2 cores: at most 40% of one busy). */
export const DefaultQuietIdleShare = 0.8

/**
 * Waits until the machine is quiet, a window of windowMs in which at least idleShare of all cores' time was idle, or
 * timeoutMs has passed; resolves to the ms waited. A burst must not share the CPU with what the last one left running
 * after the API server had its pods gone (its node's heap trim and its writable layers' removal, the namespace's
 * deletion in the control plane): it would be charged another node's work. Measured with 100-pod bursts: up to 5 s
 * after a vnode node's, 1 s (the first look) after the reference kubelet's.
 */
export async function machineQuiet({idleShare = DefaultQuietIdleShare, windowMs = 1000, timeoutMs = 60_000} = {}) {
  const start = Date.now()
  for (;;) {
    const a = cpuTicks()
    await sleep(windowMs)
    const b = cpuTicks()
    if ((b.idle - a.idle) / Math.max(1, b.total - a.total) >= idleShare || Date.now() - start >= timeoutMs) return Date.now() - start
  }
}

/**
 * Waits until the node's warm pool (network/pool/<id>.json records) has had
 * no entry in the making for quietMs: a burst on any node then never shares
 * the CPU with another node's refill. A node without a pool returns at once.
 */
export async function poolSettled(stateDir, quietMs = 1000, timeoutMs = 120_000) {
  const dir = join(stateDir, 'network', 'pool')
  const making = () => {
    try {
      return readdirSync(dir).some((f) => f.endsWith('.json') && readFileSync(join(dir, f), 'utf8').includes('"making"'))
    } catch {
      return false
    }
  }
  const deadline = Date.now() + timeoutMs
  let quietSince = Date.now()
  while (Date.now() - quietSince < quietMs && Date.now() < deadline) {
    if (making()) quietSince = Date.now()
    await sleep(100)
  }
}
