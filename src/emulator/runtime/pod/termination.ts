import type {V1Pod} from '@kubernetes/client-node'
import type {Clock} from '../../../common/clock.js'
import {DefaultTerminationGracePeriodSeconds} from '../../provider/pod-defaults.js'
import type {PodEnd} from '../container/host.js'
import type {ContainerState} from '../container/state.js'
import type {PodSandbox} from '../sandbox/pod-sandbox.js'

/** The pod's grace period in ms: a delete's, else the spec's, else the default. */
export function podGracePeriodMs(pod: V1Pod): number {
  const g = pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? DefaultTerminationGracePeriodSeconds
  return Math.max(0, Number(g)) * 1000
}

/** What terminating a pod acts on (pod/pod-runtime.ts). */
export interface TerminationHost {
  readonly containers: readonly ContainerState[]
  readonly sandbox: PodSandbox
  readonly clock: Clock
  podGraceMs(): number
  stop(c: ContainerState, message: string, graceMs: number): Promise<void>
  /** The sync pass under way, if any. */
  syncing(): Promise<void> | undefined
  /** Applies the container exits the relist has not seen yet: the end acts on the containers as they are. */
  seeExits(): void
  /** No more wake-ups of the sync loop. */
  clearWake(): void
  writeRecord(): void
  publish(): void
  /**
   * The pod's status is generated again (the kubelet's terminating sync, at its start and end, and its terminated
   * sync): a pod past its active deadline says so each time (activeDeadlineHandler records DeadlineExceeded
   * whenever generateAPIPodStatus asks it).
   */
  statusGenerated(): void
}

/**
 * The end of a pod: finished (nothing will start again) by itself, or
 * terminated (deleted, past its deadline, evicted) within a grace period
 * whose deadline only moves closer.
 */
export class PodTermination implements PodEnd {
  /** Nothing will start again. */
  finished = false
  /** When every container must be gone (epoch ms; Infinity until the pod terminates). */
  deadline = Infinity
  private terminating: Promise<void> | undefined
  /** The pod is being deleted (podDeleted was applied). */
  private deleted = false
  private released: Promise<void> | undefined
  /** finish() kills the pod with its sidecars (KillPod): nothing is reported until it is over. */
  killingPod = false
  private readonly abort = new AbortController()
  /**
   * The termination's own stops: only they move closer when a delete shortens the grace. Any other kill (a failed
   * liveness or startup probe's, a restart's, finish()'s sidecars) the kubelet made in a SyncPod, which its pod worker
   * does not cancel (kubelet.go runs the runtime's SyncPod WithoutCancel): it keeps its own grace, and the
   * termination begins after it.
   */
  private readonly ownStops = new Set<Promise<void>>()
  /** The shortest grace asked for (ms). */
  private graceMs = Infinity

  constructor(private readonly host: TerminationHost) {}

  get isTerminating(): boolean {
    return this.terminating !== undefined
  }

  /** Aborted once the pod terminates (a running postStart hook ends). */
  get signal(): AbortSignal {
    return this.abort.signal
  }

  /** The termination under way, if any. */
  get done(): Promise<void> | undefined {
    return this.terminating
  }

  /**
   * Nothing more will start: stop the ephemeral containers, then the sidecars (reverse order), and settle. A pod whose
   * sidecars were running loses its sandbox with them: the kubelet's sync kills the pod (KillPod) when its regular
   * containers are done and a sidecar still runs, where a pod with nothing running is terminal at once.
   */
  async finish(): Promise<void> {
    const host = this.host
    this.finished = true
    host.clearWake()
    host.seeExits()
    const sidecarsRan = host.containers.some((c) => c.kind === 'sidecar' && c.running)
    // KillPod's effects are seen together by the sync after it: its stopped sidecars with the sandbox gone.
    this.killingPod = sidecarsRan
    try {
      await Promise.all(host.containers.filter((c) => c.kind === 'ephemeral').map((c) => host.stop(c, `Stopping container ${c.name}`, host.podGraceMs())))
      for (const c of this.sidecarsReversed()) await host.stop(c, `Stopping container ${c.name}`, host.podGraceMs())
      if (sidecarsRan && !this.terminating) await this.releaseSandbox()
    } finally {
      this.killingPod = false
    }
    host.publish()
  }

  /** The sandbox is gone (released once, by the first of finish and terminate to need it). */
  get sandboxReleased(): boolean {
    return this.released !== undefined
  }

  private releaseSandbox(): Promise<void> {
    return (this.released ??= this.host.sandbox.release())
  }

  /**
   * Terminates the pod: regular (and running init) containers in parallel,
   * then sidecars in reverse order, all within gracePeriodSeconds, once the
   * kills under way have ended; then the sandbox is released. Called again
   * with a shorter grace, the deadline of its own stops moves closer. A
   * deleted pod's containers no longer show what kept them from starting,
   * from the call on (podDeleted).
   */
  terminate(gracePeriodSeconds: number, {deleted = false}: {deleted?: boolean} = {}): Promise<void> {
    const host = this.host
    const graceMs = Math.max(0, gracePeriodSeconds) * 1000
    this.graceMs = Math.min(this.graceMs, graceMs)
    this.deadline = Math.min(this.deadline, host.clock.now() + graceMs)
    for (const c of host.containers) if (c.stopping && this.ownStops.has(c.stopping)) c.stopDeadline.moveTo(this.deadline)
    if (deleted && !this.deleted) {
      this.deleted = true
      for (const c of host.containers) c.podDeleted()
      // Reported before the kill: the terminating sync writes the pod's status as it stands first.
      host.publish()
    }
    if (this.terminating) return this.terminating
    this.finished = true
    host.clearWake()
    host.seeExits()
    this.abort.abort()
    host.statusGenerated()
    for (const c of host.containers) c.stopProbes({keepReadiness: true})
    // The kubelet's container deletor removed the older dead instances of a container when it saw its newest die.
    const endedBefore = new Set(host.containers.filter((c) => !c.running))
    this.terminating = (async () => {
      await host.syncing()
      // Nothing of the termination's own runs yet: whatever is stopping was stopped by a sync.
      await Promise.all(host.containers.map((c) => c.stopping))
      // The grace counts from the kill, each one asked for so far (the kubelet's terminating sync gives killPod the
      // whole grace period); one asked for later counts from its call.
      this.deadline = host.clock.now() + this.graceMs
      const graceLeft = () => Math.max(0, this.deadline - host.clock.now())
      await Promise.all(host.containers.filter((c) => c.kind !== 'sidecar').map((c) => this.stop(c, graceLeft())))
      for (const c of this.sidecarsReversed()) await this.stop(c, graceLeft())
      await Promise.all(host.containers.map((c) => c.stopping))
      host.statusGenerated()
      // The pod core's TerminatePod decides which of the containers that never ran count as lost.
      for (const c of host.containers) c.podTerminated({endedBefore: endedBefore.has(c)})
      await this.releaseSandbox()
      host.statusGenerated()
      host.writeRecord()
      host.publish()
    })()
    return this.terminating
  }

  /** One of the termination's own stops. */
  private stop(c: ContainerState, graceMs: number): Promise<void> {
    const stopped = this.host.stop(c, `Stopping container ${c.name}`, graceMs)
    if (c.stopping) this.ownStops.add(c.stopping)
    return stopped
  }

  private sidecarsReversed(): ContainerState[] {
    return this.host.containers.filter((c) => c.kind === 'sidecar').reverse()
  }
}
