import type {V1Container, V1Pod, V1PodSpec} from '@kubernetes/client-node'
import {execa, type ResultPromise} from 'execa'
import {mkdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {
  clients,
  type Clients,
  createNamespace,
  deleteNamespace,
  kubectl,
  NODE,
  nodeContainer,
  processesMatching,
  runDir,
  startVnode,
  testEnv,
  uniqueName,
  type VnodeLine,
  type VnodeProcess,
  waitFor,
  watchChanges,
} from './helpers.js'

/** The node binary by absolute path: a container's PATH is the runtimes' minimal one. */
export {NODE} from './helpers.js'

/** One row of `kubectl get pod --no-headers`: NAME READY STATUS RESTARTS AGE. */
export interface PodRow {
  name: string
  ready: string
  status: string
  restarts: number
  /** "(5s ago)" part of RESTARTS, when kubectl prints one. */
  lastRestart?: string
  line: string
}

export function parseRow(line: string): PodRow | undefined {
  const m = /^(\S+)\s+(\d+\/\d+)\s+(\S+)\s+(\d+)(?:\s+\(([^)]*)\))?\s+\S+\s*$/.exec(line.trim())
  if (!m) return undefined
  return {name: m[1], ready: m[2], status: m[3], restarts: Number(m[4]), lastRestart: m[5], line: line.trim()}
}

/** A running `kubectl get ... -w` whose output lines are collected. */
export class KubectlWatch {
  readonly lines: string[] = []
  private buf = ''
  private stderr = ''
  constructor(readonly child: ResultPromise) {
    child.stderr!.on('data', (d: Buffer) => {
      this.stderr += d.toString()
    })
    child.stdout!.on('data', (d: Buffer) => {
      this.buf += d.toString()
      let i
      while ((i = this.buf.indexOf('\n')) >= 0) {
        this.lines.push(this.buf.slice(0, i))
        this.buf = this.buf.slice(i + 1)
      }
    })
    void child.catch(() => undefined)
  }

  waitLine(pred: (line: string) => boolean, what: string, timeoutMs = 30_000): Promise<string> {
    return waitFor(
      () => this.lines.find(pred),
      () => `${what} (kubectl -w printed: ${JSON.stringify(this.lines.slice(-8))}${this.stderr ? `, stderr: ${this.stderr.trim()}` : ''})`,
      timeoutMs,
      50,
    )
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill('SIGTERM')
  }
}

/** The fixture's out dir as a hostPath volume at its own path in every container that does not mount that path already. */
export function withOutDir(spec: V1PodSpec, dir: string): V1PodSpec {
  const name = 'e2e-out'
  const add = (cs: V1Container[] | undefined) => cs?.map((c) => (c.volumeMounts?.some((m) => m.mountPath === dir) ? c : {...c, volumeMounts: [...(c.volumeMounts ?? []), {name, mountPath: dir}]}))
  return {
    ...spec,
    volumes: [...(spec.volumes ?? []), {name, hostPath: {path: dir, type: 'Directory'}}],
    containers: add(spec.containers)!,
    ...(spec.initContainers ? {initContainers: add(spec.initContainers)} : {}),
  }
}

/**
 * One `kubectl vnode up` node and one namespace for a test file, with the
 * views a user has: `kubectl get pod` rows, jsonpath, describe, logs, and
 * files the containers' own commands write under `dir`.
 */
export class KubectlFixture {
  c!: Clients
  node!: VnodeProcess
  readonly nodeName: string
  readonly ns: string
  /** Where containers write what they saw (env, files, cwd): a hostPath volume at the same path in every container, the one way their writes reach the host. */
  readonly dir: string
  private readonly watches = new Set<KubectlWatch>()

  constructor(prefix: string) {
    this.nodeName = uniqueName(`${prefix}-node`)
    this.ns = uniqueName(prefix)
    this.dir = join(runDir(), 'kubectl-out', this.ns)
  }

  async setUp(args: string[] = [], env: Record<string, string> = {}): Promise<this> {
    mkdirSync(this.dir, {recursive: true, mode: 0o700})
    this.c = await clients()
    this.node = startVnode(this.nodeName, args, env)
    await createNamespace(this.c.core, this.ns)
    await this.node.ready()
    return this
  }

  async tearDown(): Promise<void> {
    for (const w of this.watches) w.stop()
    await deleteNamespace(this.c?.core, this.ns)
  }

  /** Creates the pod bound to this node (the default service account token is mounted, as for any pod). */
  create(pod: V1Pod): Promise<V1Pod> {
    return this.c.core.createNamespacedPod({namespace: this.ns, body: {...pod, spec: {nodeName: this.nodeName, ...withOutDir(pod.spec!, this.dir)}}})
  }

  /** `kubectl get pod NAME` as a row, or undefined when kubectl shows none. */
  async row(name: string): Promise<PodRow | undefined> {
    const r = await kubectl(['get', 'pod', name, '-n', this.ns, '--no-headers'])
    return r.exitCode === 0 ? parseRow(r.stdout) : undefined
  }

  /** Waits, on a `kubectl get pods -w` of the pod, for a row kubectl prints that matches. */
  async waitRow(name: string, pred: (r: PodRow) => boolean, what: string, timeoutMs = 30_000): Promise<PodRow> {
    const w = this.watch(name)
    try {
      const line = await waitFor(
        () =>
          w.lines.find((l) => {
            const r = parseRow(l)
            return r !== undefined && pred(r)
          }),
        () => `${name}: ${what} (kubectl get pods -w printed: ${w.lines.at(-1) ?? 'nothing'}; vnode said: ${this.recentLines()})`,
        timeoutMs,
        50,
      )
      return parseRow(line)!
    } finally {
      this.unwatch(w)
    }
  }

  /** The node's last output lines, for failure messages. */
  recentLines(n = 8): string {
    return this.node.lastOutput(n)
  }

  async jsonpath(name: string, expr: string): Promise<string> {
    const r = await kubectl(['get', 'pod', name, '-n', this.ns, '-o', `jsonpath=${expr}`])
    if (r.exitCode !== 0) throw new Error(`kubectl get pod ${name} -o jsonpath failed: ${r.stderr}`)
    return r.stdout
  }

  async json(name: string): Promise<V1Pod> {
    const r = await kubectl(['get', 'pod', name, '-n', this.ns, '-o', 'json'])
    if (r.exitCode !== 0) throw new Error(`kubectl get pod ${name} -o json failed: ${r.stderr}`)
    return JSON.parse(r.stdout) as V1Pod
  }

  async describe(name: string): Promise<string> {
    const r = await kubectl(['describe', 'pod', name, '-n', this.ns])
    if (r.exitCode !== 0) throw new Error(`kubectl describe pod ${name} failed: ${r.stderr}`)
    return r.stdout
  }

  /** Runs `kubectl describe pod` at first and again on each event of the pod, until its output matches. */
  async waitDescribe(name: string, re: RegExp, timeoutMs = 20_000): Promise<string> {
    let last = ''
    let eventSeen = true
    const stop = await watchChanges(this.c.kc, `/api/v1/namespaces/${this.ns}/events`, `involvedObject.name=${name}`, () => {
      eventSeen = true
    })
    try {
      return await waitFor(
        async () => {
          if (!eventSeen) return undefined
          eventSeen = false
          try {
            last = await this.describe(name)
          } catch (error) {
            eventSeen = true
            throw error
          }
          return re.test(last) ? last : undefined
        },
        () => `describe ${name} to match ${re} (last Events: ${last.slice(last.indexOf('Events:'))})`,
        timeoutMs,
        100,
      )
    } finally {
      stop()
    }
  }

  logs(name: string, args: string[] = []) {
    return kubectl(['logs', name, '-n', this.ns, ...args])
  }

  /** Waits, with `kubectl wait --for=delete`, until the pod is gone. */
  async gone(name: string, timeoutMs = 30_000): Promise<void> {
    const r = await kubectl(['wait', '--for=delete', `pod/${name}`, '-n', this.ns, `--timeout=${Math.ceil(timeoutMs / 1000)}s`])
    if (r.exitCode !== 0) throw new Error(`pod ${name} to be gone: kubectl wait exited ${r.exitCode}: ${r.stderr.trim()}`)
  }

  /** Starts a `kubectl get pods -w ...extra` of the one pod NAME and collects its lines. */
  watch(name: string, extra: string[] = ['--no-headers']): KubectlWatch {
    // A field selector, not `get pod <name>`: kubectl exits NotFound when a
    // named pod does not exist yet, and a watch is often started before create.
    const args = ['get', 'pods', '--field-selector', `metadata.name=${name}`, '-n', this.ns, '-w', ...extra]
    const child = execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), args, {env: testEnv(), reject: false, buffer: false})
    const w = new KubectlWatch(child)
    this.watches.add(w)
    return w
  }

  private unwatch(w: KubectlWatch): void {
    w.stop()
    this.watches.delete(w)
  }

  /** The file a container wrote under `dir`, once it is there (parsed as JSON when asked). */
  async file(rel: string, timeoutMs = 20_000): Promise<string> {
    return waitFor(
      () => {
        try {
          return readFileSync(join(this.dir, rel), 'utf8') || undefined
        } catch {
          return undefined
        }
      },
      `${rel} written by the container`,
      timeoutMs,
      100,
    )
  }

  out(rel: string): string {
    return join(this.dir, rel)
  }

  /** Waits until no live process carries the marker in its command line. */
  async noProcess(marker: string, timeoutMs = 10_000): Promise<void> {
    await waitFor(async () => (await processesMatching(marker)).length === 0, `no process with ${marker} left`, timeoutMs, 100)
  }

  /** The `stopped` summary line `up -o json` printed on exit. */
  summary(): {byResource: Record<string, number>; requestsSinceReady: number} | undefined {
    const l = this.node.lines.find((x: VnodeLine) => x.kind === 'stopped')
    return l?.summary as {byResource: Record<string, number>; requestsSinceReady: number} | undefined
  }
}

/** A `node -e` container of image `node` (the built-in image map's): the marker is an argument so the process table shows whose it is. */
export function markedContainer(name: string, script: string, marker: string, extra: Partial<V1Container> = {}): V1Container {
  return nodeContainer(name, script, {image: 'node', command: [NODE, '-e', script, marker], ...extra})
}
