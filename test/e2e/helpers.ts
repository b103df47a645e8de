import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import type * as k8s from '@kubernetes/client-node'
import {execa, type ResultPromise} from 'execa'
import {randomBytes} from 'node:crypto'
import {closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readlinkSync, rmSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {descendants, type ProcStat} from '../../src/emulator/runtime/process/proc.js'
import {HelperName} from '../../src/emulator/runtime/process/helper-runner.js'
import {cliPath, E2eEnv} from './env.mjs'
import {acquireHostLocks, acquireMachine, acquireShared, HostResources, type HostResource, LockWaitMs, releaseHostLocks, releaseMachine, releaseShared} from './host-lock.js'

/** The node binary by absolute path: a test container's own argv, not a shell of vnode's. */
export const NODE = process.execPath

/** A container running `node -e script` (extra fields win). */
export function nodeContainer(name: string, script: string, extra: Partial<k8s.V1Container> = {}): k8s.V1Container {
  return {name, image: 'node:test', command: [NODE, '-e', script], ...extra}
}

const describeOrSkip = (process.env[E2eEnv.skip] ? describe.skip : describe) as typeof describe

/** Holds the run's machine lock shared for the file (host-lock.ts): taken at its top level, before its own setup, released after its teardown. */
function holdMachineShared(): void {
  if (process.env[E2eEnv.skip]) return
  beforeAll(() => acquireShared(), LockWaitMs)
  afterAll(() => releaseShared())
}

/**
 * `describe`, or `describe.skip` with the reason printed when the control
 * plane is unavailable. Files run in parallel: this one beside others, unless
 * a file has the machine to itself (describeMachineE2e).
 */
export const describeE2e = Object.assign(
  (name: string, fn: () => void): void => {
    holdMachineShared()
    describeOrSkip(name, fn)
  },
  {
    each:
      <T extends unknown[]>(table: T[]) =>
      (name: string, fn: (...args: T) => void): void => {
        holdMachineShared()
        describeOrSkip.each(table)(name, fn as (...args: unknown[]) => void)
      },
  },
)

/**
 * A describe that holds the machine lock (shared or whole) and then its host
 * locks for its own length: taken before its own setup, released after its
 * teardown (jest runs a block's hooks in the order they are declared). Held
 * per block, not per file, so a file of several such blocks (network-lock.test.ts)
 * holds each block's locks only while that block runs.
 */
function describeLocked(machine: {acquire: () => Promise<void>; release: () => void}, resources: readonly HostResource[], name: string, fn: () => void): void {
  if (process.env[E2eEnv.skip]) {
    describeOrSkip(name, fn)
    return
  }
  describe(name, () => {
    beforeAll(() => machine.acquire(), LockWaitMs)
    beforeAll(() => acquireHostLocks(resources), LockWaitMs)
    fn()
    afterAll(() => releaseHostLocks(resources))
    afterAll(() => machine.release())
  })
}

/**
 * `describeE2e` for a file that reads or makes state of the whole host
 * (host-lock.ts): it also holds the host lock of each kind of state it
 * touches (the network's by default), so no other file touching the same
 * runs beside it.
 */
export function describeHostE2e(name: string, fn: () => void): void {
  describeHolding(['network'])(name, fn)
}

/** `describeHostE2e` holding the host locks of these resources (host-lock.ts HostResource) instead of the network's. */
export function describeHolding(resources: readonly HostResource[]): (name: string, fn: () => void) => void {
  return (name, fn) => describeLocked({acquire: () => acquireShared(), release: releaseShared}, resources, name, fn)
}

/**
 * `describeE2e` for a file whose load would starve the files beside it:
 * it has the machine to itself (and every host lock), once the files
 * running have finished.
 */
export function describeMachineE2e(name: string, fn: () => void): void {
  describeLocked({acquire: () => acquireMachine(), release: () => releaseMachine(expect.getState().testPath ?? undefined)}, HostResources, name, fn)
}

/**
 * `test` when this host can run it; otherwise jest's skip (counted as skipped, never as passed), and
 * under CI=true a test that fails with the reason, since CI installs and runs as what every test needs.
 */
export function testWhen(canRun: boolean, reason: string): typeof test {
  if (canRun) return test
  if (process.env.CI === 'true') return ((name: string) => test(name, () => Promise.reject(new Error(`cannot run here: ${reason}`)))) as unknown as typeof test
  return test.skip as unknown as typeof test
}

export function kubeconfigPath(): string {
  const path = process.env[E2eEnv.kubeconfig]
  if (!path) throw new Error('e2e global setup did not run')
  return path
}

export function runDir(): string {
  return process.env[E2eEnv.dir]!
}

/** `kubectl top node NAME --no-headers`, once metrics-server has two scrapes of the node. */
export async function topNode(name: string, timeoutMs = 60_000): Promise<string> {
  let last = ''
  return waitFor(
    async () => {
      const r = await kubectl(['top', 'node', name, '--no-headers'])
      last = r.stdout + r.stderr
      return r.exitCode === 0 ? r.stdout : undefined
    },
    () => `kubectl top node (last: ${last})`,
    timeoutMs,
    2000,
  )
}

/** A DNS-1123 name unique to this run. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`
}

/** A test's own ports: below, the fixed ports of programs that chose theirs; from 30000, the cluster's NodePorts. */
const ChosenPortsFrom = 20_000
const ChosenPortsTo = 30_000

/** The first port of the kernel's ephemeral range, which listen(0) and outgoing connections take theirs from. */
function ephemeralPortsFrom(): number {
  const range = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
  return Number.isInteger(range[0]) ? range[0]! : 32_768
}

const listenable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)))
  })

/**
 * A TCP port for a server a test starts later on the host's network (a pod's, without the pod network): below the
 * kernel's ephemeral range and the NodePorts, so no listen(0) and no outgoing connection of another file's vnode, test or the control
 * plane takes it between the choice and the bind (a port of freePort() can be handed out again meanwhile); free on
 * every address when chosen; and claimed for the run by a file in the run dir, so two files never choose the same.
 */
export async function serverPort(): Promise<number> {
  const to = Math.min(ChosenPortsTo, ephemeralPortsFrom())
  if (to - ChosenPortsFrom < 1_000) throw new Error(`no room for a test's own port below the ephemeral range (${to})`)
  const claims = join(runDir(), 'ports')
  mkdirSync(claims, {recursive: true})
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = ChosenPortsFrom + Math.floor(Math.random() * (to - ChosenPortsFrom))
    try {
      closeSync(openSync(join(claims, String(port)), 'wx'))
    } catch {
      continue
    }
    if (await listenable(port)) return port
  }
  throw new Error(`no free port in ${ChosenPortsFrom}-${to - 1} after 200 attempts`)
}

export function testEnv(): NodeJS.ProcessEnv {
  return {...process.env, KUBECONFIG: kubeconfigPath(), PATH: `${join(cliPath(), '..')}:${process.env[E2eEnv.binDir]}:${process.env.PATH}`}
}

export interface RunResult {
  stdout: string
  stderr: string
  exitCode: number
}

/** The real kubectl, built with the control plane. */
export async function kubectl(args: string[], input?: string): Promise<RunResult> {
  const r = await execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), args, {env: testEnv(), reject: false, input, timeout: 60_000})
  return {stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode ?? -1}
}

/** bin/kubectl-vnode run as a separate process. */
export async function vnode(args: string[], opts: {timeout?: number} = {}): Promise<RunResult> {
  const r = await execa(cliPath(), args, {env: testEnv(), reject: false, timeout: opts.timeout ?? 60_000})
  return {stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode ?? -1}
}

export async function waitFor<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, what: string | (() => string), timeoutMs = 30_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  for (;;) {
    try {
      const v = await fn()
      if (v !== undefined && v !== false) return v as T
    } catch (error) {
      lastError = error
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}${lastError ? `: ${(lastError as Error).message}` : ''}`)
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

export interface VnodeLine {
  time: string
  kind: string
  message: string
  [k: string]: unknown
}

/** A running `kubectl vnode up --no-tui -o json` process. */
export class VnodeProcess {
  readonly lines: VnodeLine[] = []
  stderr = ''
  readonly exited: Promise<number>

  constructor(
    readonly name: string,
    readonly stateDir: string,
    readonly child: ResultPromise,
  ) {
    let buf = ''
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString()
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try {
          this.lines.push(JSON.parse(line) as VnodeLine)
        } catch {
          this.lines.push({time: '', kind: 'raw', message: line})
        }
      }
    })
    child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()))
    // Killed by a signal there is no exit code: say which signal, and what the process said last, so a failure explains itself.
    const code = (r: {exitCode?: number; signal?: string}) => {
      if (r.exitCode !== undefined) return r.exitCode
      process.stderr.write(`vnode ${name} ended by ${r.signal}; last output: ${this.lastOutput(3)}\n`)
      return -1
    }
    this.exited = child.then(code, code)
  }

  /** What the node said last, for a failure message: its last `lines` output lines (kind and message) and the end of its stderr. */
  lastOutput(lines: number): string {
    return `${this.lines
      .slice(-lines)
      .map((l) => `${l.kind}: ${l.message}`)
      .join(' | ')} ${this.stderr.slice(-800)}`
  }

  get pid(): number {
    return this.child.pid!
  }

  waitForLine(pred: (l: VnodeLine) => boolean, what: string, timeoutMs = 30_000): Promise<VnodeLine> {
    return waitFor(
      () => this.lines.find(pred),
      () => `${what} (vnode ${this.name} said: ${this.lastOutput(5)})`,
      timeoutMs,
      50,
    )
  }

  async ready(timeoutMs = 30_000): Promise<void> {
    await this.waitForLine((l) => l.kind === 'step' && l.step === 'ready', 'node ready', timeoutMs)
  }

  /** SIGTERM (or another signal) and wait for the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 60_000): Promise<number> {
    if (this.child.exitCode === null) this.child.kill(signal)
    const timer = new Promise<number>((_, reject) =>
      setTimeout(() => reject(new Error(`vnode ${this.name} did not exit within ${timeoutMs} ms; last output: ${this.lastOutput(4)}`)), timeoutMs).unref(),
    )
    return Promise.race([this.exited, timer])
  }
}

const running = new Set<VnodeProcess>()

/** Starts `kubectl vnode up` for a node of this test file (env: on top of the test's own); stopAllVnodes() cleans up. */
export function startVnode(name: string, args: string[] = [], env: Record<string, string> = {}): VnodeProcess {
  const stateDir = join(runDir(), 'nodes', name)
  mkdirSync(stateDir, {recursive: true})
  // Files written for the plain mode assert its semantics (a process group, 143 for an unhandled SIGTERM,
  // $VNODE_VOLUME_ROOT); sandbox.test.ts asserts the sandbox's, and a test asks for it with --sandbox.
  const mode = args.includes('--sandbox') ? [] : ['--sandbox', 'none']
  // Any free port, unless the test needs a port it chose (a firewall rule aimed at it).
  const port = args.includes('--port') ? [] : ['--port', '0']
  const child = execa(cliPath(), ['up', '--name', name, '--no-tui', '-o', 'json', '--state-dir', stateDir, ...port, ...mode, ...args], {
    env: {...testEnv(), ...env},
    reject: false,
    buffer: false,
    // execa would SIGKILL 5 s after our SIGTERM; a node's shutdown (terminating its pods) may take longer, and stop() has its own timeout.
    forceKillAfterDelay: false,
  })
  const p = new VnodeProcess(name, stateDir, child)
  running.add(p)
  void p.exited.then(() => running.delete(p))
  return p
}

export async function stopAllVnodes(): Promise<void> {
  await Promise.all(
    [...running].map(async (p) => {
      await p.stop('SIGTERM', 40_000).catch(() => p.stop('SIGKILL'))
    }),
  )
}

export interface Clients {
  core: k8s.CoreV1Api
  coordination: k8s.CoordinationV1Api
  apps: k8s.AppsV1Api
  kc: k8s.KubeConfig
  lib: typeof k8s
}

export async function clients(): Promise<Clients> {
  const lib = await import('@kubernetes/client-node')
  const kc = new lib.KubeConfig()
  kc.loadFromFile(kubeconfigPath())
  return {core: kc.makeApiClient(lib.CoreV1Api), coordination: kc.makeApiClient(lib.CoordinationV1Api), apps: kc.makeApiClient(lib.AppsV1Api), kc, lib}
}

/**
 * Calls onChange on each event of a watch of path (an ADDED for each object
 * there at the start, then every change) until the returned stop is called.
 * A watch the server ends is started again.
 */
export async function watchChanges(kc: k8s.KubeConfig, path: string, fieldSelector: string, onChange: () => void): Promise<() => void> {
  const {Watch} = await import('@kubernetes/client-node')
  let stopped = false
  let request: AbortController | undefined
  const start = async (): Promise<void> => {
    request = await new Watch(kc).watch(
      path,
      {fieldSelector},
      () => onChange(),
      () => {
        if (!stopped) setTimeout(() => void start().catch(() => undefined), 200)
      },
    )
    if (stopped) request.abort()
  }
  await start()
  return () => {
    stopped = true
    request?.abort()
  }
}

/** The runtime's own plumbing around a sandboxed container: bwrap waits for it, nsenter runs an exec inside it. */
const RuntimeCommands = new Set(['bwrap', 'nsenter'])

/**
 * PIDs of live (non-zombie) processes whose command line contains text:
 * the container's own processes, not the runtime's plumbing that carries
 * the same argv (as a container runtime's shim), unless asked.
 */
export async function processesMatching(text: string, opts: {withRuntime?: boolean} = {}): Promise<number[]> {
  const {readdirSync, readFileSync} = await import('node:fs')
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').replaceAll('\0', ' ')
      if (!cmd.includes(text)) continue
      if (!opts.withRuntime && RuntimeCommands.has(stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')))) continue
      out.push(Number(d))
    } catch {
      /* gone */
    }
  }
  return out
}

/**
 * Creates a namespace and returns once its default ServiceAccount exists:
 * the API server refuses pods until the controller-manager has made it.
 */
export async function createNamespace(core: k8s.CoreV1Api, ns: string): Promise<void> {
  await core.createNamespace({body: {metadata: {name: ns}}})
  await waitFor(() => core.readNamespacedServiceAccount({name: 'default', namespace: ns}), `the default service account in ${ns}`, 30_000, 100)
}

/** Deletes a test's namespace (and so its pods), whatever state the test left it in. */
export async function deleteNamespace(core: k8s.CoreV1Api | undefined, ns: string): Promise<void> {
  await core?.deleteNamespace({name: ns}).catch(() => undefined)
}

/** What a test file gets from nodeWithNamespace: its clients, its namespace, its running node. */
export interface NodeFixture {
  c: Clients
  ns: string
  node: string
}

/**
 * A namespace and a vnode node of the calling describe's own (`up` with
 * args), started before its tests and stopped, with the namespace, after.
 * Pods are admitted once the controller-manager has made the namespace's
 * default ServiceAccount: the fixture waits for it.
 */
export function nodeWithNamespace(prefix: string, args: string[] = []): NodeFixture {
  const f = {ns: uniqueName(prefix), node: uniqueName(`${prefix}-node`)} as NodeFixture
  beforeAll(async () => {
    f.c = await clients()
    const node = startVnode(f.node, args)
    await createNamespace(f.c.core, f.ns)
    await node.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(f.c?.core, f.ns)
  })
  return f
}

export interface ClusterFixture extends NodeFixture {
  /** The cluster's own directory (kubeconfig, state.json). */
  clusterDir: string
  /** What `cluster up` printed on stderr (its steps, what it skipped). */
  upStderr: string
  /** The node's `up` process (a test may stop and start it again). */
  vnode: VnodeProcess
}

/**
 * A control plane of the calling describe's own, made by `kubectl vnode
 * cluster up` with its services (kube-proxy and CoreDNS as root,
 * metrics-server; node CIDRs allocated), with a vnode node (`up` with args)
 * and a namespace whose default ServiceAccount exists. The suite's
 * kubeconfig points at this cluster until the describe is over; then the
 * node stops and `cluster down` removes the cluster and its services.
 */
export function clusterWithServices(prefix: string, args: string[] = []): ClusterFixture {
  const f = {ns: uniqueName(prefix), node: uniqueName(`${prefix}-node`)} as ClusterFixture
  let dir: string | undefined
  let savedKubeconfig: string | undefined
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `vnode-${prefix}-`))
    f.clusterDir = join(dir, 'cluster')
    const up = await vnode(['cluster', 'up', '--dir', f.clusterDir, '--port', '0'], {timeout: 150_000})
    f.upStderr = up.stderr
    if (up.exitCode !== 0) throw new Error(`cluster up exited ${up.exitCode}: ${up.stderr}`)
    savedKubeconfig = process.env[E2eEnv.kubeconfig]
    process.env[E2eEnv.kubeconfig] = join(f.clusterDir, 'kubeconfig')
    f.c = await clients()
    f.vnode = startVnode(f.node, args)
    await f.vnode.ready()
    await createNamespace(f.c.core, f.ns)
  }, 200_000)
  afterAll(async () => {
    await stopAllVnodes()
    if (f.clusterDir) await vnode(['cluster', 'down', '--dir', f.clusterDir], {timeout: 60_000})
    if (savedKubeconfig !== undefined) process.env[E2eEnv.kubeconfig] = savedKubeconfig
    if (dir) rmSync(dir, {recursive: true, force: true})
  }, 90_000)
  return f
}

/**
 * A node's mount base holder (sandbox/mount-base.ts, as root in a sandbox): its child `sleep infinity` in a mount
 * namespace of its own, the node's own process and no pod's (a bare container the node spawns shares its namespace; a
 * sandboxed one is a child of its bwrap).
 */
export function mountBaseHolder(nodePid: number): number | undefined {
  const mountNs = (pid: number) => {
    try {
      return readlinkSync(`/proc/${pid}/ns/mnt`)
    } catch {
      return undefined
    }
  }
  const own = mountNs(nodePid)
  return descendants(nodePid).find((d) => d.ppid === nodePid && d.comm === 'sleep' && mountNs(d.pid) !== own)?.pid
}

/** The node's helper (process/helper-runner.ts): its child running perl with the helper's name as its argument. */
export function nodeHelper(nodePid: number): number | undefined {
  return descendants(nodePid).find((d) => d.ppid === nodePid && isNodeHelper(d.pid))?.pid
}

export function isNodeHelper(pid: number): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    return argv[1] === '-e' && argv[3] === HelperName
  } catch {
    return false
  }
}

/** The processes below a node that are its pods': every descendant but its mount base holder and its helper (the node's own). */
export function podProcesses(nodePid: number): ProcStat[] {
  const own = new Set([mountBaseHolder(nodePid), nodeHelper(nodePid)])
  return descendants(nodePid).filter((d) => !own.has(d.pid))
}
