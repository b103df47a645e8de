import type {CoreV1Api, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'
import {RealClock, type Clock, type ClockTimer} from '../../common/clock.js'
import {WakeTimer} from '../../common/wake-timer.js'
import {Backoff} from '../kube/backoff.js'
import {isStaticPod} from './config.js'
import type {MirrorTarget} from './mirror.js'
import type {WorkerStatusPort} from './pod-worker.js'
import {buildPodStatus, isTerminalPhase, type StatusOverride} from './status.js'
import {DefaultStatusWritesInFlight, WriteTurns} from './write-turns.js'
import {reconcileDue, settled, type Entry} from './status-entry.js'
import {StatusWriter} from './status-writer.js'

/** A change waits this long for more changes before it is written (bursts become one write). */
export const DefaultStatusCoalesceMs = 100
/**
 * While the provider is starting or killing a pod, writes wait up to this long:
 * a clean start is one write (Running) and a prompt kill one write (the terminal status).
 * 2 s for the start and 1 s (a relist period) until it is seen: with 2 s, a burst of sandboxed
 * starts wrote ContainerCreating just before Running, the second hundred writes waiting on the
 * client's rate limit (50/s once its burst of 100 is spent).
 */
export const DefaultTransitionHoldMs = 3_000
export const DefaultStatusRetryInitialMs = 500
export const DefaultStatusRetryMaxMs = 10_000
/**
 * How often the statuses the API holds are compared with what was written
 * (the kubelet's status sync period is 10 s). A difference seen on two
 * checks in a row, with no write between, is someone else's: the status is
 * written again, so it is back within about 10 s.
 */
export const DefaultStatusReconcileMs = 5_000

/** Deleted with no grace: the API removes the object at once, so there is nothing to write the kill's start to. */
function isForceDeleted(pod: V1Pod): boolean {
  return !!pod.metadata?.deletionTimestamp && pod.metadata.deletionGracePeriodSeconds === 0
}

export interface StatusManagerHooks {
  couldHaveRunningContainers(uid: string): boolean
  /** The worker is starting or killing the pod: a status written now would be superseded within moments. */
  inTransition(uid: string): boolean
}

export interface StatusManagerOptions {
  nodeIP: string
  /**
   * Waits for a token of the client's rate limit; the client given then
   * must not throttle again. Taking the token before building the status,
   * as the kubelet's status manager syncs the latest status when its turn
   * comes, means a pod whose write waited in the queue writes what it is by
   * then: under a burst, ContainerCreating and Running become one write.
   */
  throttle?: () => Promise<void>
  hooks: StatusManagerHooks
  coalesceMs?: number
  transitionHoldMs?: number
  retryInitialMs?: number
  retryMaxMs?: number
  /** The periodic comparison with the API (0: none). */
  reconcileMs?: number
  /** Writes in flight at once (0: no limit). */
  writesInFlight?: number
  /** The pod as last written (or changed in the API): spec plus the status we hold for it. */
  onChange?: (pod: V1Pod) => void
  onError?: (message: string) => void
  /** The clock of coalescing, holds and retries (the real one by default). */
  clock?: Clock
  /** The time conditions are stamped with; the clock's by default. */
  now?: () => Date
  /**
   * Where a static pod's status goes: its mirror pod (name and UID
   * precondition). Undefined means no mirror yet: the write waits for
   * retarget().
   */
  mirrorTarget?: (pod: V1Pod) => MirrorTarget | undefined
}

/**
 * The only writer of pod status. Keeps the provider's latest report per UID
 * (entries exist only for pods in the API and are dropped when the pod is
 * gone), builds the kubelet's status, and decides when each pod's is written
 * (coalescing, transition holds, retries, the periodic reconcile); the write
 * itself (status-writer.ts) is a strategic merge patch of pods/<name>/status
 * carrying metadata.uid as precondition and no resourceVersion: label and
 * annotation edits by others never conflict and are never overwritten. A
 * terminal phase is final.
 */
export class StatusManager implements Omit<WorkerStatusPort, 'terminate'> {
  private readonly entries = new Map<string, Entry>()
  private readonly coalesceMs: number
  private readonly transitionHoldMs: number
  private readonly now: () => Date
  private stopped = false
  private readonly reconcileTimer: ClockTimer | undefined
  private readonly clock: Clock
  private readonly turns: WriteTurns
  private readonly writer: StatusWriter
  /** Status PATCHes sent, per UID still tracked and in total. */
  writes = 0
  readonly writesByUid = new Map<string, number>()

  constructor(
    core: CoreV1Api,
    private readonly opts: StatusManagerOptions,
  ) {
    this.coalesceMs = opts.coalesceMs ?? DefaultStatusCoalesceMs
    this.transitionHoldMs = opts.transitionHoldMs ?? DefaultTransitionHoldMs
    this.clock = opts.clock ?? RealClock
    this.now = opts.now ?? (() => new Date(this.clock.now()))
    this.turns = new WriteTurns(opts.writesInFlight ?? DefaultStatusWritesInFlight, this.clock)
    this.writer = new StatusWriter(core, this.turns, opts.throttle, {
      current: (e) => !this.stopped && this.entries.get(e.uid) === e,
      build: (e) => this.buildFor(e),
      target: (e) => this.targetOf(e),
      written: (e, pod, status) => this.written(e, pod, status),
      failed: (e, message) => {
        this.opts.onError?.(message)
        if (!this.stopped && this.entries.get(e.uid) === e) this.schedule(e, e.backoff.next())
      },
    })
    const reconcileMs = opts.reconcileMs ?? DefaultStatusReconcileMs
    if (reconcileMs > 0) {
      this.reconcileTimer = this.clock.setInterval(() => this.reconcile(), reconcileMs)
      this.reconcileTimer.unref?.()
    }
  }

  /** The kubelet's syncBatch(all): a settled pod whose status in the API is not the one written (reconcileDue) is written again. */
  private reconcile(): void {
    for (const e of this.entries.values()) {
      if (!reconcileDue(e, settled(e) && !this.stopped ? this.targetOf(e) : undefined)) continue
      // Written as to a new object: the whole status, against what the API holds now.
      e.writtenTo = undefined
      e.firstDirtyAt ??= this.clock.now()
      this.schedule(e, 0)
    }
  }

  get size(): number {
    return this.entries.size
  }

  has(uid: string): boolean {
    return this.entries.has(uid)
  }

  /** The pod the API holds changed (or appeared). */
  track(pod: V1Pod): void {
    const uid = pod.metadata?.uid
    if (!uid || this.stopped) return
    const e = this.entries.get(uid)
    if (e) {
      const generationMoved = (pod.metadata?.generation ?? 0) !== (e.pod.metadata?.generation ?? 0)
      e.pod = pod
      // The status speaks for a generation (observedGeneration): a new one, a graceful delete's too, is written
      // at once, as the kubelet's sync writes it.
      if (generationMoved && !e.deleted && !e.gone) {
        e.unheld = true
        this.dirty(e)
      }
    } else {
      const isStatic = isStaticPod(pod)
      this.entries.set(uid, {
        uid,
        pod,
        isStatic,
        writtenTo: isStatic ? undefined : uid,
        sandboxReady: false,
        hadSandbox: false,
        terminal: false,
        final: false,
        deleted: false,
        gone: false,
        backoff: new Backoff(this.opts.retryInitialMs ?? DefaultStatusRetryInitialMs, this.opts.retryMaxMs ?? DefaultStatusRetryMaxMs),
        wake: new WakeTimer(() => this.due(uid), {clock: this.clock, unref: true}),
      })
      // A new pod gets its first status soon (Pending), unless it is already finished.
      if (!isTerminalPhase(pod.status?.phase)) this.dirty(this.entries.get(uid)!)
    }
    this.opts.onChange?.(this.view(this.entries.get(uid)!))
  }

  /** A static pod's mirror appeared or was replaced: write its status there soon. */
  retarget(uid: string): void {
    const e = this.entries.get(uid)
    if (e?.isStatic) this.dirty(e)
  }

  /** The pod is gone from the API: forget everything about it. */
  remove(uid: string): void {
    const e = this.entries.get(uid)
    if (!e) return
    e.wake.cancel()
    this.entries.delete(uid)
    this.writesByUid.delete(uid)
  }

  /** The provider's report (notifyPods). Reports for pods not in the API are dropped. */
  setReported(uid: string, status: V1PodStatus): void {
    const e = this.entries.get(uid)
    if (!e) return
    const next = structuredClone(status)
    if (isDeepStrictEqual(e.reported, next)) return
    e.reported = next
    this.dirty(e)
  }

  setSandboxReady(uid: string, ready: boolean): void {
    const e = this.entries.get(uid)
    if (!e || e.sandboxReady === ready) return
    e.sandboxReady = ready
    if (ready) e.hadSandbox = true
    this.dirty(e)
  }

  setStarting(uid: string, starting: boolean): void {
    const e = this.entries.get(uid)
    if (!e || starting || this.stopped) return
    // Starting ended: the hold already gathered the start's changes, so write now.
    e.firstDirtyAt ??= this.clock.now()
    this.schedule(e, 0)
  }

  reported(uid: string): V1PodStatus | undefined {
    return this.entries.get(uid)?.reported
  }

  /**
   * The worker decided from the pod's status as it stands (a sync that found every container finished, the start of
   * a kill): SyncPod and SyncTerminatingPod write the status they act on before acting, so it is written now, with
   * no transition hold; what the action changes is held as before.
   */
  writeNow(uid: string): void {
    const e = this.entries.get(uid)
    if (!e || this.stopped || isForceDeleted(e.pod)) return
    e.unheld = true
    // Built now when no write is under way (flush builds before its first wait): what the action changes from here
    // on is not in it, unless a write in flight or the client's rate limit holds it back (it is built when its turn comes).
    void this.flush(e)
  }

  /**
   * The worker is terminated: write the terminated sync's status (SyncTerminatedPod: nothing runs, the sandbox is
   * gone), then TerminatePod's (what never ran is lost, the phase is terminal) where it differs, then the final
   * DELETE if the pod is being deleted. An override (a rejection, a node shutdown) is written in one go.
   */
  async terminate(uid: string, override?: StatusOverride): Promise<void> {
    const e = this.entries.get(uid)
    if (!e) return
    e.override ??= override
    if (!e.terminal && !e.override) {
      e.terminal = true
      await this.flush(e)
    }
    e.terminal = true
    e.final = true
    await this.flush(e)
  }

  /** The status as it would be written now. */
  build(uid: string): V1PodStatus | undefined {
    const e = this.entries.get(uid)
    return e && this.buildFor(e)
  }

  /** Every tracked pod with the status we hold for it (deep copies). */
  pods(): V1Pod[] {
    return [...this.entries.values()].map((e) => this.view(e))
  }

  /** The first tracked pod of that namespace and name with the status we hold for it: read-only, not a copy (a log poll's lookup). */
  find(namespace: string, name: string): V1Pod | undefined {
    for (const e of this.entries.values()) if (e.pod.metadata?.namespace === namespace && e.pod.metadata?.name === name) return {...e.pod, status: e.written ?? e.pod.status}
    return undefined
  }

  private view(e: Entry): V1Pod {
    return structuredClone({...e.pod, status: e.written ?? e.pod.status})
  }

  private buildFor(e: Entry): V1PodStatus {
    return buildPodStatus({
      pod: e.pod,
      reported: e.reported,
      previous: e.written,
      nodeIP: this.opts.nodeIP,
      now: this.now(),
      sandboxReady: e.sandboxReady,
      hadSandbox: e.hadSandbox,
      podIsTerminal: e.terminal,
      beforeTerminatePod: !e.final,
      couldHaveRunningContainers: this.opts.hooks.couldHaveRunningContainers(e.uid),
      override: e.terminal ? e.override : undefined,
    })
  }

  private dirty(e: Entry): void {
    if (this.stopped) return
    e.firstDirtyAt ??= this.clock.now()
    this.schedule(e, this.coalesceMs)
  }

  /** Write no later than delay from now (an earlier deadline stands: the entry's WakeTimer). */
  private schedule(e: Entry, delay: number): void {
    e.wake.wakeBy(this.clock.now() + delay)
  }

  /** The write is due: unless the pod is in transition (then it waits for the hold), it goes now. */
  private due(uid: string): void {
    const e = this.entries.get(uid)
    if (!e) return
    const held = !e.unheld && this.opts.hooks.inTransition(e.uid) && e.firstDirtyAt !== undefined ? e.firstDirtyAt + this.transitionHoldMs - this.clock.now() : 0
    if (held > 0) return this.schedule(e, held)
    void this.flush(e)
  }

  private async flush(e: Entry): Promise<void> {
    while (e.writing) await e.writing
    if (this.entries.get(e.uid) !== e || e.gone || this.stopped) return
    e.wake.cancel()
    e.firstDirtyAt = undefined
    e.unheld = false
    const p = this.writer.write(e)
    e.writing = p
    try {
      await p
    } finally {
      e.writing = undefined
    }
  }

  /** The object the status is written to: the pod itself, or a static pod's mirror (undefined: none yet). */
  private targetOf(e: Entry): MirrorTarget | undefined {
    const {name, namespace, uid} = e.pod.metadata!
    if (!e.isStatic) return {name: name!, namespace: namespace!, uid: uid!, status: e.pod.status}
    return this.opts.mirrorTarget?.(e.pod)
  }

  /** A status PATCH went through: counted, and the pod as written goes to the feed. */
  private written(e: Entry, pod: V1Pod, status: V1PodStatus): void {
    this.writes++
    this.writesByUid.set(e.uid, (this.writesByUid.get(e.uid) ?? 0) + 1)
    // A static pod keeps its own identity in the feed (the mirror has another UID).
    const metadata = e.isStatic ? e.pod.metadata : (pod.metadata ?? e.pod.metadata)
    if (this.entries.get(e.uid) === e) this.opts.onChange?.(structuredClone({...e.pod, metadata, status}))
  }

  /** Write every pending change now (shutdown). */
  async flushAll(): Promise<void> {
    await Promise.all([...this.entries.values()].filter((e) => e.wake.armed || e.writing).map((e) => this.flush(e)))
  }

  stop(): void {
    this.stopped = true
    this.turns.close()
    this.clock.clearTimeout(this.reconcileTimer)
    for (const e of this.entries.values()) e.wake.cancel()
    this.entries.clear()
    this.writesByUid.clear()
  }
}
