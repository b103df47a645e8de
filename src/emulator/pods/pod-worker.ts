import {RealClock, type Clock, type ClockTimer} from '../../common/clock.js'
import {allContainerStatuses, isTerminalPhase, podKeyOf} from '../../common/pods.js'
import {EventReason} from '../kube/event-reasons.js'
import type {V1Pod} from '@kubernetes/client-node'
import {Backoff} from '../kube/backoff.js'
import {isInvalidInput, isNotFound} from '../provider/errdefs.js'
import {DefaultTerminationGracePeriodSeconds} from '../provider/pod-defaults.js'
import {reportIsTerminal, type StatusOverride} from './status.js'
import {
  DefaultResyncIntervalMs,
  DefaultWorkerRetryInitialMs,
  DefaultWorkerRetryMaxMs,
  mergeUpdates,
  MinimumGracePeriodSeconds,
  ResyncJitterFactor,
  type PodUpdate,
  type PodWorkState,
  type WorkerHost,
} from './pod-update.js'

export * from './pod-update.js'

function hadRunningContainers(pod: V1Pod): boolean {
  return allContainerStatuses(pod).some((c) => !!c.state?.running)
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * One pod UID's worker. Its state is derived from when things happened, as
 * the kubelet's podSyncStatus:
 *
 *        created
 *           │ sync: provider.createPod (or adopt)      ──► startedAt
 *           ▼
 *   ┌─► sync ── update / resync ─┐
 *   └────────────────────────────┘
 *           │ deleted, killed, removed from the API, rejected, vanished,
 *           │ or the provider reports it finished (isTerminal)
 *           ▼                                          ──► terminatingAt
 *      terminating: provider.deletePod within the grace (a shorter grace
 *           │       reaches it at once)
 *           ▼                                          ──► terminatedAt
 *      terminated: terminal status written, then the final DELETE
 *           │ removed from the API
 *           ▼
 *      forgotten: provider.cleanupPod, the worker is dropped
 *
 * A pod that is already terminal when it arrives goes straight to
 * terminating and is never started. Updates land in a single pending slot
 * so only the latest is seen.
 */
export class PodWorker {
  pod: V1Pod
  readonly uid: string
  /** podKeyOf the pod: a worker of a new UID waits for the one of the name before it. */
  readonly key: string
  /** Resolves once no process of the pod can run any more. */
  readonly terminated: Promise<void>
  private resolveTerminated!: () => void
  private pending: PodUpdate | undefined
  private loop: Promise<void> | undefined
  private gracePeriod = 0
  /** When the provider accepted the pod (created or adopted it). */
  private startedAt: number | undefined
  /** When the worker decided the pod must stop. */
  private terminatingAt: number | undefined
  /** When no process of the pod could run any more. */
  private terminatedAt: number | undefined
  private readonly clock: Clock
  private vanished = false
  private killGrace: number | undefined
  private override: StatusOverride | undefined
  removed = false
  private stopped = false
  private resyncTimer: ClockTimer | undefined
  private retryTimer: ClockTimer | undefined
  private readonly backoff: Backoff

  constructor(
    private readonly host: WorkerHost,
    first: PodUpdate,
    /** A pod of the same namespace/name that must finish terminating before this one starts. */
    private readonly predecessor?: Promise<void>,
  ) {
    this.pod = first.pod
    this.uid = first.pod.metadata!.uid!
    this.key = podKeyOf(first.pod)
    this.terminated = new Promise((resolve) => (this.resolveTerminated = resolve))
    this.backoff = new Backoff(host.retryInitialMs ?? DefaultWorkerRetryInitialMs, host.retryMaxMs ?? DefaultWorkerRetryMaxMs)
    this.clock = host.clock ?? RealClock
    this.update(first)
  }

  get state(): PodWorkState {
    if (this.terminatedAt !== undefined) return 'terminated'
    if (this.terminatingAt !== undefined) return 'terminating'
    return 'sync'
  }

  private get started(): boolean {
    return this.startedAt !== undefined
  }

  /** Waiting for the provider to start the pod for the first time (status writes wait for it). */
  get starting(): boolean {
    return this.state === 'sync' && !this.started && !this.vanished && !this.override
  }

  /** Starting for the first time or killing: the pod's status is about to change again. */
  get inTransition(): boolean {
    return this.starting || this.state === 'terminating'
  }

  get isStarted(): boolean {
    return this.started
  }

  /** SyncPod's isTerminal: the provider's last report says every container finished for good. */
  private get isTerminal(): boolean {
    return reportIsTerminal(this.pending?.pod ?? this.pod, this.host.status.reported(this.uid))
  }

  /** The provider reported a new status: once it is terminal, the worker moves on to terminating. */
  reported(): void {
    if (this.state === 'sync' && !this.stopped && this.isTerminal) this.update({type: 'sync', pod: this.pending?.pod ?? this.pod})
  }

  /** Queue an update; never blocks. */
  update(u: PodUpdate): void {
    if (this.stopped) return
    this.pending = mergeUpdates(this.pending, u)
    if (u.removed) this.removed = true
    if (u.statusOverride) this.override ??= u.statusOverride
    // A kill never waits behind the loop: pass a shorter grace to the running termination now.
    if (this.state === 'terminating' && this.killGrace !== undefined) {
      const grace = this.effectiveGrace(this.pending)
      if (grace < this.killGrace) {
        this.killGrace = grace
        this.host.provider.deletePod(structuredClone(u.pod), grace).catch((error: unknown) => {
          if (!isNotFound(error)) this.host.event(this.pod, 'Warning', EventReason.FailedKillPod, `error killing pod: ${errorText(error)}`)
        })
      }
    }
    this.kick()
  }

  private kick(): void {
    if (this.loop || this.stopped) return
    this.loop = this.run().finally(() => {
      this.loop = undefined
      if (this.pending && !this.stopped) this.kick()
    })
  }

  /** Resolves when the worker has nothing more to do right now. */
  async idle(): Promise<void> {
    while (this.loop) await this.loop
  }

  private async run(): Promise<void> {
    while (this.pending && !this.stopped) {
      const u = this.pending
      this.pending = undefined
      this.pod = u.pod
      try {
        await this.process(u)
        this.backoff.reset()
      } catch {
        this.retryLater(u)
      }
    }
  }

  private retryLater(u: PodUpdate): void {
    if (this.stopped) return
    this.clock.clearTimeout(this.retryTimer)
    this.retryTimer = this.clock.setTimeout(() => {
      this.retryTimer = undefined
      if (!this.pending) this.update(u)
    }, this.backoff.next())
    this.retryTimer.unref?.()
  }

  private shouldTerminate(u: PodUpdate): boolean {
    return u.type === 'kill' || !!u.removed || !!u.pod.metadata?.deletionTimestamp || isTerminalPhase(u.pod.status?.phase) || !!this.override || this.vanished
  }

  private async process(u: PodUpdate): Promise<void> {
    if (this.state === 'sync') {
      if (!this.shouldTerminate(u)) {
        await this.sync(u)
        if (!this.vanished && !this.override && !this.isTerminal) return
      }
      this.terminatingAt ??= this.clock.now()
      this.clock.clearTimeout(this.resyncTimer)
    }
    if (this.state === 'terminating') return this.terminate(u)
    // Terminated: a later deletionTimestamp still needs the final delete; a removal ends the worker.
    if (u.pod.metadata?.deletionTimestamp && !this.removed) await this.host.status.terminate(this.uid, this.override)
    if (this.removed) await this.forget()
  }

  private async sync(u: PodUpdate): Promise<void> {
    const {provider} = this.host
    const ns = u.pod.metadata?.namespace ?? ''
    const name = u.pod.metadata?.name ?? ''
    if (!this.started) {
      if (this.predecessor) await this.predecessor
      const existing = await provider.getPod(ns, name)
      if (existing && existing.metadata?.uid === this.uid) {
        // The provider already runs it (it survived a restart): adopt, and hand it the pod as the API has it now.
        this.startedAt ??= this.clock.now()
        this.host.status.setSandboxReady(this.uid, true)
        try {
          await provider.updatePod(structuredClone(u.pod))
        } catch (error) {
          if (!isNotFound(error)) throw error
          this.vanished = true
          return
        }
      } else if (hadRunningContainers(u.pod)) {
        // The API says it ran, the provider has no trace of it: its processes are gone.
        this.vanished = true
        return
      } else {
        await this.create(u.pod)
      }
      this.scheduleResync()
      return
    }
    if (u.type === 'update') {
      try {
        await provider.updatePod(structuredClone(u.pod))
      } catch (error) {
        if (isNotFound(error)) {
          this.vanished = true
          return
        }
        this.host.event(u.pod, 'Warning', EventReason.ProviderUpdateFailed, errorText(error))
        throw error
      }
    } else if (u.type === 'sync' && !this.isTerminal) {
      if (!(await provider.getPod(ns, name))) {
        this.vanished = true
        return
      }
    }
    this.scheduleResync()
  }

  private async create(pod: V1Pod): Promise<void> {
    this.host.status.setStarting(this.uid, true)
    try {
      await this.host.provider.createPod(structuredClone(pod))
      this.startedAt ??= this.clock.now()
      this.host.status.setSandboxReady(this.uid, true)
      this.host.created?.(pod)
    } catch (error) {
      if (isInvalidInput(error)) {
        // The pod can never run as written: fail it rather than retry forever.
        this.override = {phase: 'Failed', reason: 'ProviderFailed', message: errorText(error)}
        this.host.event(pod, 'Warning', EventReason.ProviderCreateFailed, errorText(error))
        return
      }
      this.host.event(pod, 'Warning', EventReason.ProviderCreateFailed, errorText(error))
      throw error
    } finally {
      this.host.status.setStarting(this.uid, false)
    }
  }

  private scheduleResync(): void {
    this.clock.clearTimeout(this.resyncTimer)
    if (this.stopped || this.state !== 'sync') return
    const base = this.host.resyncIntervalMs ?? DefaultResyncIntervalMs
    this.resyncTimer = this.clock.setTimeout(
      () => {
        this.resyncTimer = undefined
        this.update({type: 'sync', pod: this.pod})
      },
      base * (1 + Math.random() * ResyncJitterFactor),
    )
    this.resyncTimer.unref?.()
  }

  /** calculateEffectiveGracePeriod: deletion grace or override, else the spec's; only shrinks; at least 1 s. */
  effectiveGrace(u: PodUpdate): number {
    let grace = this.gracePeriod
    let overridden = false
    const deletion = u.pod.metadata?.deletionGracePeriodSeconds
    if (deletion !== undefined && deletion !== null && (grace === 0 || deletion < grace)) {
      grace = deletion
      overridden = true
    }
    const o = u.gracePeriodOverride
    if (o !== undefined && (grace === 0 || o < grace)) {
      grace = o
      overridden = true
    }
    if (!overridden && grace === 0) grace = u.pod.spec?.terminationGracePeriodSeconds ?? DefaultTerminationGracePeriodSeconds
    if (grace < MinimumGracePeriodSeconds) grace = MinimumGracePeriodSeconds
    this.gracePeriod = grace
    return grace
  }

  private async terminate(u: PodUpdate): Promise<void> {
    const grace = this.effectiveGrace(u)
    if (this.started && !this.vanished) {
      const pod = structuredClone(u.pod)
      this.killGrace = grace
      try {
        const killing = this.host.provider.deletePod(pod, grace)
        // SyncTerminatingPod writes the status it starts from: a finished container before its sandbox goes, a
        // deleted pod's containers without what kept them from starting (the provider reported it as the kill began).
        this.host.status.writeNow(this.uid)
        await killing
      } catch (error) {
        // NotFound: the processes are already gone, which is what deletion wants.
        if (!isNotFound(error)) {
          this.host.event(u.pod, 'Warning', EventReason.FailedKillPod, `error killing pod: ${errorText(error)}`)
          throw error
        }
      } finally {
        this.killGrace = undefined
      }
      // The final container states, in case their notification is still on its way.
      try {
        const status = await this.host.provider.getPodStatus(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '')
        if (status) this.host.status.setReported(this.uid, status)
      } catch {
        /* the last notification stands */
      }
    }
    this.terminatedAt ??= this.clock.now()
    this.host.status.setSandboxReady(this.uid, false)
    this.resolveTerminated()
    await this.host.status.terminate(this.uid, this.override)
    if (this.removed) await this.forget()
  }

  private async forget(): Promise<void> {
    if (this.stopped) return
    this.stop()
    if (this.started) {
      try {
        await this.host.provider.cleanupPod?.(structuredClone(this.pod))
      } catch {
        /* best effort: the pod is gone from the API either way */
      }
    }
    this.host.forget(this.uid)
  }

  /** Stop timers and ignore further updates. */
  stop(): void {
    this.stopped = true
    this.pending = undefined
    this.clock.clearTimeout(this.resyncTimer)
    this.clock.clearTimeout(this.retryTimer)
  }
}
