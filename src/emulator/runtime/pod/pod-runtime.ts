import type {V1Container, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {RealClock, sleep, type Clock} from '../../../common/clock.js'
import {SerialRunner} from '../../../common/serial-runner.js'
import {WakeTimer} from '../../../common/wake-timer.js'
import {EventReason} from '../../kube/event-reasons.js'
import {terminationOf} from '../container/exit.js'
import type {CrashLoopTiming} from '../container/crash-loop.js'
import {startProbes} from '../container/probing.js'
import type {ContainerHost, ContainerRuntimeDeps} from '../container/host.js'
import {podRef} from '../../../common/pods.js'
import {ContainerState} from '../container/state.js'
import {stopContainer} from '../container/stop.js'
import {podLogDir} from '../logs/layout.js'
import type {ContainerProcess} from '../process/container-process.js'
import type {ExitInfo} from '../process/process-spec.js'
import {PodSandbox, type PodSandboxDeps} from '../sandbox/pod-sandbox.js'
import type {PidNamespaceHolder} from '../sandbox/pod-pid-namespace.js'
import {removeTree} from '../../../common/remove-tree.js'
import type {RealLink} from '../volumes/volumes.js'
import {defaultWaiting, PodStatusReporter, podStatus, unseenStarts, type PodOutcome} from './pod-status.js'
import {podRecord, PodRecordWriter, type PodRecord, type RestoredContainer} from './record.js'
import {restoreContainers} from './adoption.js'
import {PodSync} from './sync-pod.js'
import {DeadlineExceededMessage, DeadlineExceededReason} from './pod-actions.js'
import {nextRelist, syncBackoffDelay} from './sync-clock.js'
import {applySpecChange, ephemeralSpecs} from './update.js'
import {podGracePeriodMs, PodTermination} from './termination.js'
import {UnseenExits} from './unseen-exits.js'

export interface PodRuntimeDeps extends ContainerRuntimeDeps, Omit<PodSandboxDeps, 'dir' | 'clock' | 'pod' | 'changed'> {
  crashLoop: CrashLoopTiming
  sandbox: string
  /** Plain mode: why limits are not enforced (a Warning on each pod with limits). */
  limitsNotEnforced?: string
  /** The clock of every decision (the real one by default). */
  clock?: Clock
  /** Called with a fresh copy of the pod whenever the reported status changes. */
  notify(pod: V1Pod): void
}

/**
 * One pod's containers, with the kubelet's rules: init containers in order
 * (each must exit 0 before the next starts), sidecars (init containers with
 * restartPolicy Always) started in their place and kept running, regular
 * containers restarted per restartPolicy under CrashLoopBackOff, and the pod
 * terminal when nothing will restart. One sync loop decides and then does;
 * process exits, probe verdicts and timers only kick it. A sync pass runs
 * SyncPod's numbered steps (sync-pod.ts).
 *
 * A container's states and their transitions are drawn in container/state.ts.
 */
export class PodRuntime implements ContainerHost {
  pod: V1Pod
  readonly containers: ContainerState[]
  readonly sandbox: PodSandbox
  readonly clock: Clock
  outcome: PodOutcome | undefined
  closed = false
  readonly createdAt: number
  readonly end: PodTermination
  private readonly reports: PodStatusReporter
  /** The sync loop: one pass at a time, requests during one coalesce into one more. */
  private readonly loop: SerialRunner
  /** The loop's next wake-up (a deadline that only moves earlier). */
  private readonly wakeTimer: WakeTimer
  /** SyncPod's steps (sync-pod.ts) and their retry clock. */
  private readonly steps: PodSync
  private readonly recordWriter = new PodRecordWriter()
  /** Exits the relist has not seen yet (unseen-exits.ts). */
  readonly unseenExits: UnseenExits

  constructor(
    pod: V1Pod,
    readonly deps: PodRuntimeDeps,
  ) {
    this.pod = pod
    this.clock = deps.clock ?? RealClock
    this.loop = new SerialRunner(() => this.syncPass(), {active: () => !this.closed})
    this.wakeTimer = new WakeTimer(() => void this.kick(), {clock: this.clock})
    this.createdAt = this.clock.now()
    this.unseenExits = new UnseenExits(this.clock, deps.sync)
    const spec = pod.spec!
    this.containers = [
      ...(spec.initContainers ?? []).map((c) => this.newContainer(c, c.restartPolicy === 'Always' ? 'sidecar' : 'init')),
      ...spec.containers.map((c) => this.newContainer(c, 'regular')),
      ...ephemeralSpecs(pod).map((c) => this.newContainer(c, 'ephemeral')),
    ]
    this.sandbox = new PodSandbox({...deps, dir: deps.sandbox, clock: this.clock, pod: () => this.pod, changed: () => this.writeRecord()})
    this.end = new PodTermination({
      containers: this.containers,
      sandbox: this.sandbox,
      clock: this.clock,
      podGraceMs: () => this.podGraceMs(),
      stop: (c, message, graceMs) => stopContainer(this, c, message, graceMs),
      syncing: () => this.loop.running,
      seeExits: () => this.unseenExits.seeAll(),
      clearWake: () => this.wakeTimer.cancel(),
      writeRecord: () => this.writeRecord(),
      publish: () => this.publish(),
      statusGenerated: () => {
        if (this.outcome?.reason === DeadlineExceededReason) this.podEvent('Normal', EventReason.DeadlineExceeded, DeadlineExceededMessage)
      },
    })
    this.reports = new PodStatusReporter(this, (pod) => deps.notify(pod))
    this.steps = new PodSync(this)
  }

  private newContainer(spec: V1Container, kind: ContainerState['kind']): ContainerState {
    return new ContainerState(spec, kind, this.deps.crashLoop, this.clock)
  }

  get uid(): string {
    return this.pod.metadata!.uid!
  }

  get key(): string {
    return `${this.pod.metadata!.namespace}/${this.pod.metadata!.name}`
  }

  get isTerminating(): boolean {
    return this.end.isTerminating
  }

  get sandboxReleased(): boolean {
    return this.end.sandboxReleased
  }

  get killingPod(): boolean {
    return this.end.killingPod
  }

  seeDueExits(): void {
    this.unseenExits.seeDue()
  }

  /** Starts the pod; resolves after the first sync pass (started, not ready) once the relist has seen its starts. */
  async start(): Promise<void> {
    await this.sandbox.open(this.pod)
    this.sandbox.cgroup.warnUnenforced(this.pod, this.deps.limitsNotEnforced, (m) => this.podEvent('Warning', EventReason.LimitsNotEnforced, m))
    this.writeRecord()
    this.publish()
    await this.kick()
    // The start is reported with the relist that sees it: the pod core holds its first write until then.
    const unseen = unseenStarts(this.containers, this.clock.now())
    if (unseen.length > 0) await sleep(this.clock, Math.max(...unseen) - this.clock.now() + 1)
    this.publish()
  }

  /** The spec, labels or annotations changed (update.ts): a changed image or a resize may restart a container. */
  async update(pod: V1Pod): Promise<void> {
    const before = this.pod
    this.pod = pod
    this.sandbox.refresh.track(pod)
    this.sandbox.refresh.podChanged()
    applySpecChange(this, before, (spec) => this.containers.push(this.newContainer(spec, 'ephemeral')))
    this.publish()
    await this.kick()
  }

  // ---- the sync loop ----

  /** Asks for a sync pass: passes never overlap, and requests during one coalesce. */
  kick(): Promise<void> {
    return this.loop.run()
  }

  private async syncPass(): Promise<void> {
    await this.steps.syncOnce().catch((error: unknown) => {
      this.podEvent('Warning', EventReason.FailedSync, `error syncing pod: ${(error as Error).message}`)
      this.wake(this.clock.now() + syncBackoffDelay(this.deps.sync))
    })
    this.publish()
  }

  /** A sync that failed (a container's config, image or start): the next one comes on the pod worker's clock. */
  retrySyncLater(): void {
    this.steps.retrySyncLater()
  }

  retryAt(at: number): void {
    this.steps.retryAt(at)
  }

  /** A sync pass at `at` (epoch ms), unless one is due sooner; none once nothing will start again. */
  wake(at: number): void {
    if (!this.closed && !this.end.finished) this.wakeTimer.wakeBy(at)
  }

  // ---- a container instance's life ----

  /** A started or adopted instance: its exit, its record, its probes (which enter a sandbox: not before it is set up). */
  watchProcess(c: ContainerState, proc: ContainerProcess): void {
    void proc.exited.then((exit) => this.onExit(c, proc, exit))
    this.writeRecord()
    this.publish()
    void proc.entered().then(() => {
      if (c.proc === proc && proc.exit === undefined) startProbes(this, c, proc)
    })
  }

  private onExit(c: ContainerState, proc: ContainerProcess, exit: ExitInfo): void {
    c.stopProbes()
    // The kernel's OOM accounting of the container's cgroup, read before the cgroup goes.
    const termination = terminationOf(c, proc.startedAt, exit, this.sandbox.cgroup.exited(c.name))
    // A sandbox that failed before its program ran failed the start, and says so as a failed start does (container/start.ts).
    if (exit.setupFailed) this.event(c, 'Warning', EventReason.FailedToStartContainer, `Error: ${termination.message}`)
    const see = () => {
      if (c.proc !== proc) return
      c.exited(termination, exit.exitCode)
      this.writeRecord()
      this.publish()
      void this.kick()
    }
    // An exit the node caused (a stop, the pod's end) is seen by the kill that waits for it; any other at the relist.
    if (!c.stopping && !this.end.isTerminating && !this.closed) return this.unseenExits.add(c, see, exit.finishedAt.getTime())
    see()
  }

  /**
   * A kill is over (container/stop.ts): the relist after it still finds the container dead and syncs the pod again (a
   * PLEG event after the kill's own sync), so a container the kill left in back-off says so twice. Asked for when the
   * stop ends, which always follows the exit it waited for.
   */
  syncAtNextRelist(): void {
    this.wake(nextRelist(this.clock.now() + 1, this.deps.sync))
  }

  /** A stop acts on the container as it is: an exit the relist has not seen yet is seen now. */
  seeExit(c: ContainerState): void {
    this.unseenExits.seeNow(c)
  }

  /** After a vnode restart (adoption.ts), before any sync pass: the containers as the record and /proc found them. */
  restore(found: RestoredContainer[], links: RealLink[], pidHolder?: PidNamespaceHolder): void {
    this.sandbox.restore(links, pidHolder)
    this.steps.initDone = restoreContainers(this, found)
    this.writeRecord()
    // Whoever registers for notifications next gets the restored status, even if unchanged.
    this.reports.forget()
  }

  // ---- the end ----

  podGraceMs(): number {
    return podGracePeriodMs(this.pod)
  }

  /** Terminates the pod within gracePeriodSeconds (termination.ts); a shorter grace moves the deadline closer. */
  terminate(gracePeriodSeconds: number, opts?: {deleted?: boolean}): Promise<void> {
    return this.end.terminate(gracePeriodSeconds, opts)
  }

  /** The container GC: of each container's dead instances only the newest is kept (it is the lastState of a running one). */
  collectDeadInstances(): void {
    if (this.closed) return
    for (const c of this.containers) c.collectDead()
    this.publish()
  }

  /** No process of the pod is left. */
  get quiet(): boolean {
    return this.containers.every((c) => !c.running)
  }

  /** Forgets the pod: sandbox, volumes (secrets), real mountPath links, logs. */
  async cleanup(): Promise<void> {
    await this.close()
    await this.sandbox.remove()
    await removeTree(podLogDir(this.deps.ctx.stateDir, this.pod.metadata!.namespace!, this.pod.metadata!.name!, this.uid))
    this.deps.ctx.recorder.forget(this.uid)
  }

  /** Kills whatever still runs (grace 0) and stops every timer; the record stays for adoption. */
  async close(): Promise<void> {
    await (this.end.done ?? this.terminate(0))
    this.closed = true
    this.wakeTimer.cancel()
    this.reports.close()
    await this.sandbox.refresh.release()
    for (const c of this.containers) c.stopProbes()
  }

  // ---- reporting ----

  defaultWaiting(): string {
    return defaultWaiting(this.pod)
  }

  status(): V1PodStatus {
    return podStatus(this)
  }

  snapshot(): V1Pod {
    return this.reports.snapshot()
  }

  publishWhenObserved(): void {
    this.reports.publishWhenObserved()
  }

  publish(): void {
    this.reports.publish()
  }

  event(c: ContainerState, type: 'Normal' | 'Warning', reason: string, message: string): void {
    void this.deps.ctx.recorder.record(c.ref(this.pod), type, reason, message)
  }

  podEvent(type: 'Normal' | 'Warning', reason: string, message: string): void {
    void this.deps.ctx.recorder.record(podRef(this.pod), type, reason, message)
  }

  record(): PodRecord {
    return podRecord(this.pod, this.sandbox, this.containers, new Date(this.clock.now()))
  }

  writeRecord(): void {
    if (this.closed) return
    try {
      this.recordWriter.write(this.record())
    } catch {
      // The sandbox is gone (cleanup raced an exit): nothing to record.
    }
  }
}
