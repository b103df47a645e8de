import {podRef} from '../../../common/pods.js'
import type {V1Container, V1ContainerState, V1ContainerStatus, V1ObjectReference, V1Pod} from '@kubernetes/client-node'
import {RealClock, type Clock} from '../../../common/clock.js'
import type {ContainerProcess} from '../process/container-process.js'
import {terminatedState, type ContainerFields, type ContainerKind, type Termination, type Waiting} from './fields.js'
import {CrashLoopBackoff, type CrashLoopTiming} from './crash-loop.js'
import type {ProbeWorker} from '../probes/worker.js'
import {StopDeadline} from './stop-deadline.js'

// The container's door: what it knows is named in fields.ts.
export type {ContainerKind, Termination, Waiting} from './fields.js'

/** The reasons a container waits with when its last start failed: the runtime's error, a failed postStart hook. */
export const StartFailedReasons: ReadonlySet<string> = new Set(['RunContainerError', 'PostStartHookError'])

/**
 * The runtime's knowledge of one container of a pod, across its instances.
 * What it knows is read anywhere and changed only by the transitions below.
 *
 * Its states, and the transitions (methods of this class) that move it:
 *   waiting (ContainerCreating, PodInitializing)  --created, run-->        running, unseen until its relist (seenAt)
 *   waiting                                       --config fails-->        waiting CreateContainer(Config)Error (waitWith)
 *   created                                       --spawn refused-->       waiting RunContainerError, StartError in lastState (startFailed)
 *   running                                       --postStart fails-->     running, then waiting PostStartHookError (waitAfterExit)
 *   running                                       --process exits-->       running until its relist sees it (pod/unseen-exits.ts),
 *                                                                            then terminated (exited); a stop's exit at once
 *   terminated                                    --back-off-->            terminated until the next sync (foundInBackOff), then
 *                                                                            waiting CrashLoopBackOff (syncBegins), then created again
 *   terminated                                    --will not restart-->    terminated, no reason (clearWaiting)
 *   waiting, terminated                           --pod deleted-->         no reason: ContainerCreating, or its last instance (podDeleted)
 *   any                                           --pod terminated-->      terminated, no reason (podTerminated)
 */
export class ContainerState {
  /** Written only by the transitions below. */
  private readonly s: ContainerFields = {instances: 0, history: [], started: false, ready: false, imageID: '', probes: [], restartNow: false}
  readonly backoff: CrashLoopBackoff
  /** When a stop is under way: its deadline (epoch ms; only moves closer) and completion. */
  readonly stopDeadline: StopDeadline

  constructor(
    spec: V1Container,
    readonly kind: ContainerKind,
    timing: CrashLoopTiming,
    clock: Clock = RealClock,
  ) {
    this.s.spec = spec
    this.backoff = new CrashLoopBackoff(timing)
    this.stopDeadline = new StopDeadline(clock)
  }

  get spec(): V1Container {
    return this.s.spec!
  }

  /** The running instance, until it exits (its output may still drain). */
  get proc(): ContainerProcess | undefined {
    return this.s.proc
  }

  get containerID(): string | undefined {
    return this.s.containerID
  }

  /** Instances started so far; restartCount is this minus one. */
  get instances(): number {
    return this.s.instances
  }

  /** When set, the container is not running and this says why it waits. */
  get waiting(): Waiting | undefined {
    return this.s.waiting
  }

  /** Finished instances, newest first (at most two: the last state of the current one, and the one before). */
  get history(): readonly Termination[] {
    return this.s.history
  }

  get started(): boolean {
    return this.s.started
  }

  get ready(): boolean {
    return this.s.ready
  }

  get imageID(): string {
    return this.s.imageID
  }

  get probes(): readonly ProbeWorker[] {
    return this.s.probes
  }

  /** The stop under way, if any (resolves when it is over). */
  get stopping(): Promise<void> | undefined {
    return this.s.stopping
  }

  /** Restart without back-off after the current instance exits (spec changed). */
  get restartNow(): boolean {
    return this.s.restartNow
  }

  /** Its probe killed the current instance to restart it, not yet judged: the start is judged from the exit before (startGate). */
  get killedToRestart(): boolean {
    return this.s.shownUntilRestart !== undefined
  }

  /** The image the running instance was started with. */
  get runningImage(): string | undefined {
    return this.s.runningImage
  }

  get logPath(): string | undefined {
    return this.s.logPath
  }

  /** The mirrored terminationMessagePath of the current instance. */
  get terminationMessageFile(): string | undefined {
    return this.s.terminationMessageFile
  }

  /** See ContainerFields.unobserved. */
  get unobserved(): ContainerFields['unobserved'] {
    return this.s.unobserved
  }

  get name(): string {
    return this.spec.name
  }

  get running(): boolean {
    return this.proc !== undefined
  }

  get everRan(): boolean {
    return this.instances > 0 || this.history.length > 0
  }

  get restartCount(): number {
    return Math.max(0, this.instances - 1)
  }

  get lastExit(): Termination | undefined {
    return this.history[0]
  }

  fieldPath(): string {
    if (this.kind === 'ephemeral') return `spec.ephemeralContainers{${this.name}}`
    return this.kind === 'regular' ? `spec.containers{${this.name}}` : `spec.initContainers{${this.name}}`
  }

  ref(pod: V1Pod): V1ObjectReference {
    return {...podRef(pod), fieldPath: this.fieldPath()}
  }

  /** Whether the current instance's start has been seen (see unobserved). */
  observed(now: number): boolean {
    return !this.unobserved || now >= this.unobserved.until
  }

  status(defaultWaiting: string, now: number): V1ContainerStatus {
    if (this.proc && !this.observed(now)) return structuredClone(this.unobserved!.status)
    if (this.s.shownUntilRestart) return structuredClone(this.s.shownUntilRestart)
    let state: V1ContainerState
    let last: Termination | undefined
    if (this.proc) {
      state = {running: {startedAt: this.proc.startedAt}}
      last = this.history[0]
    } else if (this.waiting || this.history.length === 0) {
      state = {waiting: {reason: this.waiting?.reason ?? defaultWaiting, ...(this.waiting?.message ? {message: this.waiting.message} : {})}}
      last = this.history[0]
    } else {
      state = {terminated: terminatedState(this.history[0])}
      last = this.history[1]
    }
    return {
      name: this.name,
      image: this.spec.image ?? '',
      imageID: this.imageID,
      ...(this.containerID ? {containerID: this.containerID} : {}),
      ready: this.ready,
      started: this.proc ? this.started : false,
      restartCount: this.restartCount,
      state,
      lastState: last ? {terminated: terminatedState(last)} : {},
    }
  }

  // ---- transitions ----

  /** The pod's spec changed: the running instance keeps what it started with (runningImage). */
  respec(spec: V1Container): void {
    this.s.spec = spec
  }

  /** Restart without back-off once the current instance is gone (a changed image, a resize that needs it). */
  restartSoon(): void {
    this.s.restartNow = true
  }

  /** Its probe kills the running instance, which restarts (startGate judges how); `shown` is its status now. */
  killToRestart(shown: V1ContainerStatus): void {
    if (this.s.proc) this.s.shownUntilRestart = shown
  }

  /** A start is attempted: a restart asked for by restartSoon is under way. */
  startAttempted(): void {
    this.s.restartNow = false
  }

  /** The container waits with this reason (a config error, CrashLoopBackOff). */
  waitWith(waiting: Waiting): void {
    this.s.waiting = waiting
    this.s.shownUntilRestart = undefined
  }

  /** A sync found it kept from starting: it waits with this reason from the next sync on (see syncReason). */
  cacheReason(waiting: Waiting): void {
    this.s.syncReason = waiting
  }

  /**
   * A sync found it in back-off (CrashLoopBackOff): shown from the next sync (cacheReason). A container its probe
   * killed was found in back-off by the sync that killed it, whose reason the sync after the kill shows: this one.
   * One whose start failed shows it at once: its next start fails within the sync that would show it, where the
   * kubelet writes the status before the start (and the start's own error from the sync after).
   */
  foundInBackOff(waiting: Waiting): void {
    if (this.killedToRestart || (this.waiting !== undefined && StartFailedReasons.has(this.waiting.reason))) this.waitWith(waiting)
    else this.cacheReason(waiting)
  }

  /** A sync begins: what the sync before it found is shown now, for a container that does not run (a later sync finds it again). */
  syncBegins(): void {
    const found = this.s.syncReason
    this.s.syncReason = undefined
    if (found && !this.s.proc) this.waitWith(found)
  }

  /** Nothing to wait for: it will not run again. */
  clearWaiting(): void {
    this.s.waiting = undefined
  }

  /** A new instance is created: its IDs, log and termination file; restartCount counts the instances before it. */
  created(instance: {containerID: string; imageID: string; logPath: string; terminationFile: string}): void {
    this.s.terminationMessageFile = instance.terminationFile
    this.s.instances++
    this.s.imageID = instance.imageID
    this.s.containerID = instance.containerID
    this.s.logPath = instance.logPath
    this.s.waiting = undefined
    this.s.syncReason = undefined
    this.s.shownUntilRestart = undefined
  }

  /** The runtime could not start the instance: it ended at once, and the container waits with RunContainerError until the next sync. */
  startFailed(t: Termination, message: string): void {
    this.pushTermination(t)
    this.s.waiting = {reason: 'RunContainerError', message}
  }

  /** The instance runs; `before` (the status until now) shows until the relist sees it (seenAt). */
  run(proc: ContainerProcess, before: V1ContainerStatus): void {
    this.s.unobserved = {until: Infinity, status: before}
    this.s.proc = proc
    this.s.runningImage = this.spec.image
    this.s.started = !this.spec.startupProbe
    this.s.ready = this.started && !this.spec.readinessProbe && this.kind !== 'init'
  }

  /** The relist that sees the start comes at `until` (epoch ms, sync-clock.ts). */
  seenAt(until: number, before: V1ContainerStatus): void {
    this.s.unobserved = {until, status: before}
  }

  /** A live instance taken over after a vnode restart (adoption.ts). */
  adopt(proc: ContainerProcess, terminationFile: string | undefined): void {
    this.s.proc = proc
    this.s.runningImage = this.spec.image
    this.s.started = !this.spec.startupProbe
    this.s.ready = this.started && !this.spec.readinessProbe && this.kind !== 'init'
    this.s.terminationMessageFile = terminationFile
  }

  /** What the record says of the container's instances (adoption.ts). */
  restore(found: {instances: number; containerID?: string; logPath?: string; imageID?: string; history: Termination[]}): void {
    this.s.instances = found.instances
    this.s.containerID = found.containerID
    this.s.logPath = found.logPath
    this.s.imageID = found.imageID ?? ''
    this.s.history = [...found.history]
  }

  /** A failed postStart hook: once this instance is gone the container waits with PostStartHookError. */
  waitAfterExit(waiting: Waiting): void {
    this.s.pendingWaiting = waiting
  }

  addProbe(worker: ProbeWorker): void {
    this.s.probes.push(worker)
  }

  /** Stops the probe workers (all, or all but readiness, which a terminating pod keeps). */
  stopProbes({keepReadiness = false} = {}): void {
    for (const p of this.probes) if (!keepReadiness || p.kind !== 'readiness') p.stop()
  }

  /** A probe's verdict: readiness, or a startup probe that passed (started, with its readiness). */
  probed(verdict: {started?: boolean; ready: boolean}): void {
    if (verdict.started) this.s.started = true
    this.s.ready = verdict.ready
  }

  /** The instance exited (exitCode as the process reported it): not started, and ready only as a completed init container. */
  exited(t: Termination, exitCode: number): void {
    this.stopProbes()
    this.s.probes = []
    if (this.s.pendingWaiting) {
      this.s.waiting = this.s.pendingWaiting
      this.s.pendingWaiting = undefined
    }
    this.pushTermination(t)
    this.s.proc = undefined
    this.s.unobserved = undefined
    this.s.started = false
    this.s.ready = this.kind === 'init' && exitCode === 0
  }

  /** A stop is under way (stopping resolves when it is over). */
  stopBegun(stopping: Promise<void>): void {
    this.s.stopping = stopping
  }

  stopEnded(): void {
    this.s.stopping = undefined
    this.stopDeadline.reset()
  }

  /**
   * The pod is being deleted: nothing of a deleted pod restarts (ShouldContainerBeRestarted), so the reason cache no
   * longer speaks for it. A container kept from starting shows its default waiting reason again, a crashed one its
   * last instance, from the kill's start on.
   */
  podDeleted(): void {
    this.s.waiting = undefined
    this.s.syncReason = undefined
    this.s.pendingWaiting = undefined
  }

  /**
   * The pod terminated: nothing will start again, so no reason to wait
   * (ShouldContainerBeRestarted is false), and ready only as a completed
   * init container, as the kubelet reports it to the end. Its terminating
   * status lists the dead instances the runtime still has: a container
   * its termination stopped keeps the one before as lastState; one that had
   * ended before (endedBefore) has only its newest, the kubelet's container
   * deletor having removed the older when it saw the newest die
   * (cleanUpContainersInPod, keeping one).
   */
  podTerminated({endedBefore}: {endedBefore: boolean}): void {
    this.podDeleted()
    this.s.shownUntilRestart = undefined
    if (endedBefore) this.collectDead()
    if (this.kind !== 'init') this.s.ready = false
  }

  /** The container GC: of the dead instances only the newest is kept (the lastState of a running one). */
  collectDead(): void {
    if (this.history.length > 1) this.s.history.length = 1
  }

  private pushTermination(t: Termination): void {
    this.s.history.unshift(t)
    this.s.history.length = Math.min(this.history.length, 2)
  }
}
