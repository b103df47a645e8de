import type {V1Container, V1ContainerStatus, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {notFound, unavailable} from '../../src/emulator/provider/errdefs.js'
import type {PodLifecycleHandler} from '../../src/emulator/provider/handler.js'
import {RealClock, type Clock, type ClockTimer} from '../../src/common/clock.js'

/**
 * An in-memory provider that "runs" containers with timers. Behaviour is set
 * per container through env:
 * - TEST_START_MS: time to start (default 0)
 * - TEST_RUN_MS + TEST_EXIT_CODE: exit on its own after that long (default: run forever)
 * - TEST_TERM_EXIT_MS: traps SIGTERM and exits 0 that long after it (default: dies at once, on the clock's next turn, 143)
 * - TEST_IGNORE_TERM=1: ignores SIGTERM; killed at the grace deadline (137)
 * Containers are not restarted. Statuses flow back only through notifyPods.
 */

interface Ctr {
  spec: V1Container
  status: V1ContainerStatus
  timers: ClockTimer[]
  deadline?: number
  onExit: Array<() => void>
}

interface Sandbox {
  pod: V1Pod
  containers: Ctr[]
  startedAt: Date
}

export interface ProviderCall {
  op: 'create' | 'update' | 'delete' | 'cleanup'
  uid: string
  name: string
  grace?: number
  at: number
}

const env = (c: V1Container, key: string) => c.env?.find((e) => e.name === key)?.value

export class TestProvider implements PodLifecycleHandler {
  readonly calls: ProviderCall[] = []
  private readonly pods = new Map<string, Sandbox>()
  private callback: ((pod: V1Pod) => void) | undefined
  private closed = false
  /** Make the next deletePod calls fail with this error (once each). */
  failNextDelete: Error[] = []
  /** Answer deletePod with NotFound while still holding the pod (a provider that lost track). */
  deleteAnswersNotFound = false

  private readonly clock: Clock

  /** clock: the time of its starts, runs and kills (the real one by default). */
  constructor(readonly opts: {nodeName?: string; clock?: Clock} = {}) {
    this.clock = opts.clock ?? RealClock
  }

  private key(ns: string | undefined, name: string | undefined) {
    return `${ns ?? ''}/${name ?? ''}`
  }

  private record(op: ProviderCall['op'], pod: V1Pod, grace?: number) {
    this.calls.push({op, uid: pod.metadata?.uid ?? '', name: pod.metadata?.name ?? '', grace, at: this.clock.now()})
  }

  /** Pods the provider holds (running or finished, not cleaned up). */
  get size(): number {
    return this.pods.size
  }

  /** Containers still running, over all pods. */
  get runningContainers(): number {
    let n = 0
    for (const s of this.pods.values()) n += s.containers.filter((c) => c.status.state?.running).length
    return n
  }

  /** Live timers (leak check). */
  get timers(): number {
    let n = 0
    for (const s of this.pods.values()) for (const c of s.containers) n += c.timers.length
    return n
  }

  notifyPods(callback: (pod: V1Pod) => void): void {
    this.callback = callback
  }

  private statusOf(s: Sandbox): V1PodStatus {
    return {containerStatuses: s.containers.map((c) => structuredClone(c.status))}
  }

  private notify(s: Sandbox): void {
    if (this.closed || !this.callback) return
    const pod = structuredClone(s.pod)
    pod.status = this.statusOf(s)
    this.callback(pod)
  }

  async createPod(pod: V1Pod): Promise<void> {
    if (this.closed) throw unavailable('provider closed')
    this.record('create', pod)
    // Prove the core hands over copies: mutating ours must not reach the watch cache.
    pod.metadata = {...pod.metadata, annotations: {...pod.metadata?.annotations, 'test.vnode.dev/mutated': 'true'}}
    const s: Sandbox = {
      pod,
      startedAt: new Date(this.clock.now()),
      containers: pod.spec!.containers.map((spec) => ({
        spec,
        status: {name: spec.name, image: spec.image ?? '', imageID: '', ready: false, started: false, restartCount: 0, state: {waiting: {reason: 'ContainerCreating'}}},
        timers: [],
        onExit: [],
      })),
    }
    this.pods.set(this.key(pod.metadata?.namespace, pod.metadata?.name), s)
    this.notify(s)
    await Promise.all(
      s.containers.map(async (c) => {
        const startMs = Number(env(c.spec, 'TEST_START_MS') ?? 0)
        if (startMs > 0) await new Promise((r) => this.clock.setTimeout(() => r(undefined), startMs))
        if (!c.status.state?.waiting) return
        const now = new Date(this.clock.now())
        c.status = {...c.status, containerID: `test://${pod.metadata?.uid}-${c.spec.name}`, ready: true, started: true, state: {running: {startedAt: now}}}
        const runMs = env(c.spec, 'TEST_RUN_MS')
        if (runMs !== undefined) this.after(c, Number(runMs), () => this.exit(s, c, Number(env(c.spec, 'TEST_EXIT_CODE') ?? 0)))
      }),
    )
    this.notify(s)
  }

  private after(c: Ctr, ms: number, fn: () => void): void {
    const t = this.clock.setTimeout(() => {
      c.timers = c.timers.filter((x) => x !== t)
      fn()
    }, ms)
    c.timers.push(t)
  }

  private exit(s: Sandbox, c: Ctr, exitCode: number): void {
    if (!c.status.state?.running) return
    for (const t of c.timers) this.clock.clearTimeout(t)
    c.timers = []
    const startedAt = c.status.state.running.startedAt
    c.status = {
      ...c.status,
      ready: false,
      started: false,
      state: {terminated: {exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt, finishedAt: new Date(this.clock.now()), containerID: c.status.containerID}},
    }
    for (const f of c.onExit.splice(0)) f()
    this.notify(s)
  }

  async updatePod(pod: V1Pod): Promise<void> {
    const s = this.pods.get(this.key(pod.metadata?.namespace, pod.metadata?.name))
    if (!s) throw notFound(`pod ${pod.metadata?.name} not found`)
    this.record('update', pod)
    s.pod = pod
  }

  async deletePod(pod: V1Pod, gracePeriodSeconds: number): Promise<void> {
    this.record('delete', pod, gracePeriodSeconds)
    const failure = this.failNextDelete.shift()
    if (failure) throw failure
    const s = this.pods.get(this.key(pod.metadata?.namespace, pod.metadata?.name))
    if (!s || this.deleteAnswersNotFound) throw notFound(`pod ${pod.metadata?.name} not found`)
    const deadline = this.clock.now() + gracePeriodSeconds * 1000
    await Promise.all(
      s.containers.map((c) => {
        if (!c.status.state?.running) return undefined
        const done = new Promise<void>((resolve) => c.onExit.push(resolve))
        const firstSignal = c.deadline === undefined
        if (c.deadline === undefined || deadline < c.deadline) {
          // SIGKILL at the (new, closer) deadline.
          c.deadline = deadline
          this.after(c, deadline - this.clock.now(), () => this.exit(s, c, 137))
        }
        if (firstSignal) {
          const trapMs = env(c.spec, 'TEST_TERM_EXIT_MS')
          if (env(c.spec, 'TEST_IGNORE_TERM') === '1') {
            /* keeps running until SIGKILL */
          } else this.after(c, Number(trapMs ?? 0), () => this.exit(s, c, trapMs === undefined ? 143 : 0))
        }
        return done
      }),
    )
  }

  async cleanupPod(pod: V1Pod): Promise<void> {
    const k = this.key(pod.metadata?.namespace, pod.metadata?.name)
    const s = this.pods.get(k)
    if (!s || s.pod.metadata?.uid !== pod.metadata?.uid) return
    this.record('cleanup', pod)
    this.drop(k, s)
  }

  /** The pod's processes disappear without a trace (no notification). */
  vanish(namespace: string, name: string): void {
    const k = this.key(namespace, name)
    const s = this.pods.get(k)
    if (s) this.drop(k, s)
  }

  private drop(k: string, s: Sandbox): void {
    for (const c of s.containers) {
      for (const t of c.timers) this.clock.clearTimeout(t)
      c.timers = []
      for (const f of c.onExit.splice(0)) f()
    }
    this.pods.delete(k)
  }

  async getPod(namespace: string, name: string): Promise<V1Pod | undefined> {
    const s = this.pods.get(this.key(namespace, name))
    if (!s) return undefined
    const pod = structuredClone(s.pod)
    pod.status = this.statusOf(s)
    return pod
  }

  async getPodStatus(namespace: string, name: string): Promise<V1PodStatus | undefined> {
    const s = this.pods.get(this.key(namespace, name))
    return s ? this.statusOf(s) : undefined
  }

  async getPods(): Promise<V1Pod[]> {
    return Promise.all([...this.pods.values()].map((s) => this.getPod(s.pod.metadata?.namespace ?? '', s.pod.metadata?.name ?? '') as Promise<V1Pod>))
  }

  async close(): Promise<void> {
    this.closed = true
    for (const [k, s] of [...this.pods.entries()]) this.drop(k, s)
  }
}
