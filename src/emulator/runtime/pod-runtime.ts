import type {V1Container, V1Lifecycle, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {randomBytes} from 'node:crypto'
import {mkdirSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {SandboxWaitingReason, type ProviderContext} from '../provider/handler.js'
import {Backoff} from '../kube/backoff.js'
import {terminationOf} from './container-exit.js'
import {containerConfig, terminationFileOf} from './container-config.js'
import {ContainerProcess, StartError, type ExitInfo} from './container-process.js'
import {ContainerState, podDesc, podRef} from './container-state.js'
import {goDuration, type CrashLoopTiming} from './crash-loop.js'
import {nextRelist, syncBackoffDelay, type SyncClock} from './sync-clock.js'
import type {NodeFacts} from './env.js'
import {runHook, type HandlerContext, type HandlerOutcome} from './handlers.js'
import type {ImageMap} from './images.js'
import {EventReason} from '../kube/event-reasons.js'
import {containerLogDir, containerLogFile, podLogDir} from './log-layout.js'
import {DefaultLocalStorageCheckMs, EvictedReason, EvictionGracePeriodSeconds, hasLocalStorageLimits, localStorageViolation, podLocalStorageUsage} from './local-storage.js'
import type {LogRotation} from './logs.js'
import {containerRecord, writePodRecord, type PodRecord, type RestoredContainer} from './pod-record.js'
import {containerProbes, probeEffect} from './probe-effects.js'
import {ProbeWorker, type ProbeKind, type ProbeResult} from './probes.js'
import type {TokenSource} from './service-account-tokens.js'
import {VolumeRefresher, type VolumeRefreshOptions} from './volume-refresh.js'
import type {NodeCgroups} from './cgroups/node-cgroups.js'
import {PodCgroupState} from './cgroups/pod-cgroup.js'
import {PodNetworkAttachment} from './network/pod-attachment.js'
import type {PodNetwork} from './network/pod-network.js'
import {containerHostname, hostsFile, resolvConf, type PodDNS} from './sandbox/pod-files.js'
import type {SandboxMode} from './sandbox/spec.js'
import {holderAlive, startPidNamespaceHolder, stopPidNamespaceHolder, type PidNamespaceHolder} from './sandbox/pod-pid-namespace.js'
import {materialiseVolumes, removeRealLinks, removeTree, volumesDir, type MaterialisedVolume, type RealLink} from './volumes.js'
import {DefaultTerminationGracePeriodSeconds as DefaultTerminationGraceSeconds} from '../provider/pod-defaults.js'

/** Waiting reasons of a container that could not be created on a sync: retried on the next sync, not under CrashLoopBackOff. */
const SyncRetryReasons = new Set(['CreateContainerConfigError', 'CreateContainerError', 'ErrImageNeverPull'])
/** A start that failed (the runtime's error): the next sync comes on the pod worker's back-off, and then the crash-loop back-off applies. */
const StartFailedReasons = new Set(['RunContainerError', 'PostStartHookError'])

/** The kubelet's message for a failed postStart hook (lifecycle/handlers.go), which the container's waiting state carries. */
export function hookErrorMessage(handler: NonNullable<V1Lifecycle['postStart']>, container: string, pod: V1Pod, r: HandlerOutcome): string {
  if (handler.exec) {
    return `Exec lifecycle hook ([${(handler.exec.command ?? []).join(' ')}]) for Container "${container}" in Pod "${podDesc(pod)}" failed - error: ${r.error ?? r.output}, message: ${JSON.stringify(r.error ? r.output : '')}`
  }
  if (handler.httpGet) return `HTTP lifecycle hook (${handler.httpGet.path ?? ''}) for Container "${container}" in Pod "${podDesc(pod)}" failed - error: ${r.output}`
  return r.output
}

/** The kubelet's minimumGracePeriodInSeconds: every container gets at least this after SIGTERM. */
export const MinimumKillGraceMs = 2_000
/** Where handlers (probes, hooks) reach a container without a host: loopback, as pods share the host network. */
export const ProbeHost = '127.0.0.1'

/** The pod's ephemeral containers, as containers (their fields are a subset). */
function ephemeralSpecs(pod: V1Pod): V1Container[] {
  return (pod.spec?.ephemeralContainers ?? []) as V1Container[]
}

export interface PodRuntimeDeps {
  ctx: ProviderContext
  images: ImageMap
  node: NodeFacts
  rotation: LogRotation
  crashLoop: CrashLoopTiming
  /** Retrying volumes that did not mount (the volume manager's backoff). */
  mountRetry: {initialMs: number; maxMs: number}
  /** The kubelet's relist and sync back-off: when a start is seen, when a failed sync is retried. */
  sync: SyncClock
  sandbox: string
  /** The pod's projected service account tokens (shared by the node's pods). */
  tokens: TokenSource
  volumeRefresh?: VolumeRefreshOptions
  /** Containers' default PATH: the one `up` was started with. */
  path?: string
  /** The node's cgroup tree; undefined where none can be made (the plain mode). */
  cgroups?: NodeCgroups
  /** Plain mode: why limits are not enforced (a Warning on each pod with limits). */
  limitsNotEnforced?: string
  /** Node allocatable, for a resize's feasibility. */
  allocatable?: {cpuCores: number; memoryBytes: number}
  /** The node's pod network; undefined: the pod runs on the host network. */
  network?: PodNetwork
  /** On the host network: warns when a container's declared ports are already taken on the host. */
  checkHostPorts?: (pod: V1Pod, container: ContainerState) => Promise<void>
  /** namespaces: each container in a pod sandbox (sandbox/); none: a bare host process. */
  sandboxMode: SandboxMode
  dns: PodDNS
  /** Called with a container's main process host pid before its program runs (cgroups). */
  beforeExec?: (pod: V1Pod, container: string, pid: number) => Promise<void>
  /** Called with a fresh copy of the pod whenever the reported status changes. */
  notify(pod: V1Pod): void
}

/** A pod-level outcome the provider decides itself (the rest is the status manager's). */
interface PodOutcome {
  phase: 'Failed'
  reason: string
  message: string
}

/**
 * One pod's containers, with the kubelet's rules: init containers in order
 * (each must exit 0 before the next starts), sidecars (init containers with
 * restartPolicy Always) started in their place and kept running, regular
 * containers restarted per restartPolicy under CrashLoopBackOff, and the pod
 * terminal when nothing will restart. A single sync loop decides what to
 * start; process exits, probe verdicts and timers only kick it.
 */
export class PodRuntime {
  pod: V1Pod
  readonly containers: ContainerState[]
  private initDone = false
  private volumes: Map<string, MaterialisedVolume> | undefined
  private links: RealLink[] = []
  private readonly createdAt = Date.now()
  private outcome: PodOutcome | undefined
  /** Nothing will start again: terminal by itself, deadline, or deletion. */
  private finished = false
  private terminating: Promise<void> | undefined
  private podDeadline = Infinity
  private readonly abort = new AbortController()
  private dirty = false
  private loop: Promise<void> | undefined
  private wakeTimer: NodeJS.Timeout | undefined
  private wakeAt = Infinity
  private readonly mountRetry: Backoff
  /** No retry of a failed setup or container config before this (epoch ms). */
  private configRetryAt = 0
  /** Syncs of this pod that failed so far (the first retry comes with the sandbox's relist, later ones on the back-off). */
  private failedSyncs = 0
  /** Mounts that failed so far: the sandbox waits for them. */
  private mountFailures = 0
  private observeTimer: NodeJS.Timeout | undefined
  /** When the local storage limits are measured next (local-storage.ts). */
  private storageCheckAt = 0
  private lastNotified = ''
  private closed = false
  private readonly refresh: VolumeRefresher
  /** The pod's cgroup, its containers' cgroups, resize state (cgroups/pod-cgroup.ts). */
  readonly cgroup: PodCgroupState
  /** The pod's network namespace and address, when the node has a pod network. */
  readonly net: PodNetworkAttachment
  /** shareProcessNamespace in a sandbox: the PID 1 every container joins. */
  private pidHolder: PidNamespaceHolder | undefined

  constructor(
    pod: V1Pod,
    private readonly deps: PodRuntimeDeps,
  ) {
    this.pod = pod
    const spec = pod.spec!
    this.containers = [
      ...(spec.initContainers ?? []).map((c) => new ContainerState(c, c.restartPolicy === 'Always' ? 'sidecar' : 'init', deps.crashLoop)),
      ...spec.containers.map((c) => new ContainerState(c, 'regular', deps.crashLoop)),
      ...ephemeralSpecs(pod).map((c) => new ContainerState(c, 'ephemeral', deps.crashLoop)),
    ]
    this.mountRetry = new Backoff(deps.mountRetry.initialMs, deps.mountRetry.maxMs)
    this.refresh = new VolumeRefresher(
      {
        pod: () => this.pod,
        sandbox: deps.sandbox,
        volumes: this.volumeDeps(),
        objects: deps.ctx.objects,
        failed: (message) => void deps.ctx.recorder.record(podRef(this.pod), 'Warning', 'FailedMount', message),
      },
      deps.volumeRefresh,
    )
    this.cgroup = new PodCgroupState(deps.cgroups, deps.allocatable)
    this.net = new PodNetworkAttachment(deps.network, () => this.pod)
  }

  private volumeDeps() {
    return {node: this.deps.node, objects: this.deps.ctx.objects, tokens: this.deps.tokens, core: this.deps.ctx.core}
  }

  get uid(): string {
    return this.pod.metadata!.uid!
  }

  get key(): string {
    return `${this.pod.metadata!.namespace}/${this.pod.metadata!.name}`
  }

  get isTerminating(): boolean {
    return this.terminating !== undefined
  }

  private get inits(): ContainerState[] {
    return this.containers.filter((c) => c.kind === 'init' || c.kind === 'sidecar')
  }

  private get ephemerals(): ContainerState[] {
    return this.containers.filter((c) => c.kind === 'ephemeral')
  }

  private get regulars(): ContainerState[] {
    return this.containers.filter((c) => c.kind === 'regular')
  }

  private get sidecars(): ContainerState[] {
    return this.containers.filter((c) => c.kind === 'sidecar')
  }

  private get restartPolicy(): string {
    return this.pod.spec?.restartPolicy ?? 'Always'
  }

  /** Starts the pod; resolves after the first sync pass (started, not ready) once the relist has seen its starts. */
  async start(): Promise<void> {
    mkdirSync(this.deps.sandbox, {recursive: true, mode: 0o700})
    this.refresh.track(this.pod)
    this.cgroup.warnUnenforced(this.pod, this.deps.limitsNotEnforced, (m) => void this.deps.ctx.recorder.record(podRef(this.pod), 'Warning', 'LimitsNotEnforced', m))
    this.writeRecord()
    this.publish()
    await this.kick()
    // The start is reported with the relist that sees it: the pod core holds its first write until then.
    const unseen = this.containers
      .filter((c) => c.proc && !c.observed())
      .map((c) => c.unobserved!.until)
      .filter(Number.isFinite)
    if (unseen.length > 0) await new Promise((r) => setTimeout(r, Math.max(...unseen) - Date.now() + 1))
    this.publish()
  }

  /** The spec, labels or annotations changed: a changed image restarts its container. */
  async update(pod: V1Pod): Promise<void> {
    const before = this.pod
    this.pod = pod
    this.refresh.track(pod)
    this.refresh.podChanged()
    this.resize(before)
    const specs = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]
    for (const c of this.containers) {
      const spec = specs.find((s) => s.name === c.name)
      if (!spec) continue
      const changed = c.running && c.runningImage !== undefined && spec.image !== c.runningImage
      c.spec = spec
      if (changed && !this.finished) {
        c.restartNow = true
        void this.stopContainer(c, `Container ${c.name} definition changed, will be restarted`, this.podGraceMs())
      }
    }
    // `kubectl debug`: ephemeral containers are only ever added; the next sync starts them.
    for (const e of ephemeralSpecs(pod)) if (!this.containers.some((c) => c.name === e.name)) this.containers.push(new ContainerState(e, 'ephemeral', this.deps.crashLoop))
    this.publish()
    await this.kick()
  }

  /** In-place resize: applied to the running containers' cgroups, or their restart where resizePolicy says so. */
  private resize(before: V1Pod): void {
    const running = this.containers.filter((c) => c.running && !c.stopping)
    const r = this.cgroup.resize(
      before,
      this.pod,
      running.map((c) => ({name: c.name, spec: [...(this.pod.spec?.initContainers ?? []), ...(this.pod.spec?.containers ?? [])].find((s) => s.name === c.name) ?? c.spec})),
    )
    for (const name of r.restart) {
      const c = this.containers.find((x) => x.name === name)
      if (!c || this.finished) continue
      c.restartNow = true
      void this.stopContainer(c, `Container ${c.name} resize requires restart`, this.podGraceMs())
    }
    if (r.completed) void this.deps.ctx.recorder.record(podRef(this.pod), 'Normal', 'ResizeCompleted', r.completed)
  }

  // ---- the sync loop ----

  /** Asks for a sync pass; passes never overlap and requests during one coalesce. */
  kick(): Promise<void> {
    this.dirty = true
    if (!this.loop) {
      this.loop = (async () => {
        try {
          while (this.dirty && !this.closed) {
            this.dirty = false
            await this.syncOnce().catch((error: unknown) => {
              void this.deps.ctx.recorder.record(podRef(this.pod), 'Warning', 'FailedSync', `error syncing pod: ${(error as Error).message}`)
              this.scheduleWake(Date.now() + syncBackoffDelay(this.deps.sync))
            })
            this.publish()
          }
        } finally {
          this.loop = undefined
        }
      })()
    }
    return this.loop
  }

  private scheduleWake(at: number): void {
    if (this.closed || this.finished || at >= this.wakeAt) return
    if (this.wakeTimer) clearTimeout(this.wakeTimer)
    this.wakeAt = at
    this.wakeTimer = setTimeout(
      () => {
        this.wakeTimer = undefined
        this.wakeAt = Infinity
        void this.kick()
      },
      Math.max(0, at - Date.now()),
    )
  }

  private clearWake(): void {
    if (this.wakeTimer) clearTimeout(this.wakeTimer)
    this.wakeTimer = undefined
    this.wakeAt = Infinity
  }

  private async syncOnce(): Promise<void> {
    if (this.finished) return
    if (this.checkActiveDeadline()) return
    if (!this.volumes && !(await this.setUpVolumes())) return
    if (await this.checkLocalStorage()) return
    if (!(await this.setUpNetwork())) return
    if (!this.initDone && !(await this.syncInitContainers())) return
    for (const c of this.sidecars) if (!this.finished && !c.running && !c.stopping) await this.maybeStart(c)
    for (const c of this.regulars) {
      if (this.finished || c.running || c.stopping) continue
      if (!c.everRan || this.shouldRestart(c)) await this.maybeStart(c)
      else c.waiting = undefined
    }
    // Ephemeral containers run once the pod's containers run, and never restart.
    for (const c of this.ephemerals) if (!this.finished && !c.running && !c.stopping && !c.everRan) await this.maybeStart(c)
    if (!this.finished && this.regulars.every((c) => !c.running && !c.stopping && c.everRan && !c.waiting && !this.shouldRestart(c))) {
      await this.finish()
    }
  }

  /** Runs init containers in order; true once all have completed (sidecars: started). */
  private async syncInitContainers(): Promise<boolean> {
    for (const c of this.inits) {
      if (this.finished) return false
      if (c.kind === 'sidecar') {
        if (!c.running && !c.stopping) await this.maybeStart(c)
        if (!c.running || !c.started) return false
        continue
      }
      if (c.running || c.stopping) return false
      const last = c.lastExit
      if (last && c.instances > 0 && last.exitCode === 0 && !c.waiting) continue
      if (last && last.exitCode !== 0 && this.restartPolicy === 'Never') {
        c.waiting = undefined
        await this.finish()
        return false
      }
      await this.maybeStart(c)
      return false
    }
    this.initDone = true
    return true
  }

  private shouldRestart(c: ContainerState): boolean {
    if (this.finished || this.terminating) return false
    if (!c.everRan || c.restartNow) return true
    if (c.kind === 'sidecar') return true
    const last = c.lastExit
    if (this.restartPolicy === 'Never') return false
    if (this.restartPolicy === 'OnFailure') return (last?.exitCode ?? 0) !== 0
    return true
  }

  /** Starts a container unless it is in CrashLoopBackOff or waits for its config. */
  private async maybeStart(c: ContainerState): Promise<void> {
    if (c.waiting && (SyncRetryReasons.has(c.waiting.reason) || StartFailedReasons.has(c.waiting.reason))) {
      if (Date.now() < this.configRetryAt) return this.scheduleWake(this.configRetryAt)
    }
    const last = c.lastExit
    if (last && c.instances > 0 && !c.restartNow && !(c.waiting && SyncRetryReasons.has(c.waiting.reason))) {
      const wait = c.backoff.check(last.finishedAt.getTime())
      if (wait > 0) {
        // Every sync that finds the container in back-off says so, and the pod is synced again
        // on the worker's back-off, not when the back-off ends (pod_workers.go).
        this.event(c, 'Warning', 'BackOff', `Back-off restarting failed container ${c.name} in pod ${podDesc(this.pod)}`)
        c.waiting = {reason: 'CrashLoopBackOff', message: `back-off ${goDuration(c.backoff.currentMs)} restarting failed container=${c.name} pod=${podDesc(this.pod)}`}
        return this.scheduleWake(Date.now() + syncBackoffDelay(this.deps.sync))
      }
    }
    c.restartNow = false
    await this.startContainer(c)
  }

  private async setUpVolumes(): Promise<boolean> {
    if (Date.now() < this.configRetryAt) {
      this.scheduleWake(this.configRetryAt)
      return false
    }
    const r = await materialiseVolumes(this.pod, this.deps.sandbox, this.volumeDeps())
    if (!r.ok) {
      void this.deps.ctx.recorder.record(podRef(this.pod), 'Warning', 'FailedMount', r.message)
      this.mountFailures++
      this.configRetryAt = Date.now() + this.mountRetry.next()
      this.scheduleWake(this.configRetryAt)
      return false
    }
    this.volumes = r.volumes
    this.refresh.enable()
    this.writePodFiles()
    this.mountRetry.reset()
    this.configRetryAt = 0
    return true
  }

  /** The pod's network namespace and address, before any container starts (the kubelet's RunPodSandbox). */
  private async setUpNetwork(): Promise<boolean> {
    if (!this.net.enabled || this.net.attachment) return true
    if (Date.now() < this.configRetryAt) {
      this.scheduleWake(this.configRetryAt)
      return false
    }
    try {
      await this.net.ensure()
      // /etc/hosts names the pod's own address now.
      this.writePodFiles()
      return true
    } catch (error) {
      void this.deps.ctx.recorder.record(podRef(this.pod), 'Warning', 'FailedCreatePodSandBox', `Failed to create pod sandbox: ${(error as Error).message}`)
      this.retrySyncLater()
      return false
    }
  }

  /** A sync that failed (a container's config, image or start): the next one comes on the pod worker's clock. */
  private retrySyncLater(): void {
    const now = Date.now()
    this.configRetryAt = this.failedSyncs++ === 0 ? Math.max(nextRelist(now + 1, this.deps.sync), now + 1) : now + syncBackoffDelay(this.deps.sync)
    this.scheduleWake(this.configRetryAt)
  }

  private checkActiveDeadline(): boolean {
    const ads = this.pod.spec?.activeDeadlineSeconds
    if (ads === undefined || ads === null) return false
    const start = this.pod.status?.startTime ? new Date(this.pod.status.startTime).getTime() : this.createdAt
    const at = start + Number(ads) * 1000
    if (Date.now() < at) {
      this.scheduleWake(at)
      return false
    }
    const message = 'Pod was active on the node longer than the specified deadline'
    this.outcome = {phase: 'Failed', reason: 'DeadlineExceeded', message}
    void this.deps.ctx.recorder.record(podRef(this.pod), 'Normal', 'DeadlineExceeded', message)
    void this.terminate(this.podGraceMs() / 1000)
    return true
  }

  /** The eviction manager's local storage limits, measured every DefaultLocalStorageCheckMs for a pod that has any. */
  private async checkLocalStorage(): Promise<boolean> {
    if (!hasLocalStorageLimits(this.pod)) return false
    if (Date.now() < this.storageCheckAt) {
      this.scheduleWake(this.storageCheckAt)
      return false
    }
    this.storageCheckAt = Date.now() + DefaultLocalStorageCheckMs
    this.scheduleWake(this.storageCheckAt)
    const message = localStorageViolation(
      this.pod,
      await podLocalStorageUsage(this.pod, this.volumes, (c) => containerLogDir(this.deps.ctx.stateDir, this.pod.metadata!.namespace!, this.pod.metadata!.name!, this.uid, c)),
    )
    if (!message || this.finished) return false
    this.outcome = {phase: 'Failed', reason: EvictedReason, message}
    void this.deps.ctx.recorder.record(podRef(this.pod), 'Warning', EventReason.Evicted, message)
    void this.terminate(EvictionGracePeriodSeconds)
    return true
  }

  // ---- starting a container ----

  private async startContainer(c: ContainerState): Promise<void> {
    const pod = this.pod
    const config = await containerConfig({
      pod,
      c,
      containers: this.containers,
      ctx: this.deps.ctx,
      images: this.deps.images,
      node: this.deps.node,
      path: this.deps.path,
      sandbox: this.deps.sandbox,
      sandboxMode: this.deps.sandboxMode,
      volumes: this.volumes!,
      podFiles: this.podFiles(),
      netns: this.net.netns,
      sharedPid: async () => (await this.sharedPidNamespace()).pid,
      event: (type, reason, message) => this.event(c, type, reason, message),
      podEvent: (type, reason, message) => void this.deps.ctx.recorder.record(podRef(pod), type, reason, message),
    })
    if (!config.ok) return this.configFailed(c, config.reason, config.message, config.event)
    for (const l of config.links) if (!this.links.some((x) => x.path === l.path)) this.links.push(l)
    if (this.finished) return
    mkdirSync(dirname(config.terminationFile), {recursive: true, mode: 0o700})
    writeFileSync(config.terminationFile, '', {mode: 0o600})
    c.terminationMessageFile = config.terminationFile
    const {argv, env, cwd, view} = config

    // What the status showed until now: it still does until the start is seen.
    const before = c.status(this.defaultWaiting())
    // The new instance's restartCount: how many instances ran before it.
    const logPath = containerLogFile(this.deps.ctx.stateDir, pod.metadata!.namespace!, pod.metadata!.name!, this.uid, c.name, c.instances)
    c.instances++
    c.imageID = config.imageID
    c.containerID = `vnode://${randomBytes(32).toString('hex')}`
    c.logPath = logPath
    c.waiting = undefined
    this.configRetryAt = 0
    this.event(c, 'Normal', 'Created', `Created container: ${c.name}`)
    if (!this.net.enabled) await this.deps.checkHostPorts?.(pod, c)
    let proc: ContainerProcess
    try {
      const cgroup = this.cgroup.createContainer(this.pod, c.name, c.spec, c.containerID)
      const pipes = join(this.deps.sandbox, 'io', `${c.name}-${c.restartCount}`)
      mkdirSync(dirname(pipes), {recursive: true, mode: 0o700})
      const beforeExec = this.deps.beforeExec
      const cgroups = this.deps.cgroups
      proc = await ContainerProcess.start({
        argv,
        env,
        cwd,
        logPath,
        pipes,
        rotation: this.deps.rotation,
        stdin: c.spec.stdin === true,
        tty: c.spec.tty === true,
        sandbox: view,
        // Into the container's cgroup before its program runs (the sandbox blocks until then; plain mode: right after spawn).
        beforeExec:
          cgroup || beforeExec
            ? async (pid) => {
                if (cgroup) cgroups!.place(cgroup, pid)
                await beforeExec?.(pod, c.name, pid)
              }
            : undefined,
      })
    } catch (error) {
      this.cgroup.discard(c.name)
      if (!(error instanceof StartError)) throw error
      const now = new Date()
      c.pushTermination({exitCode: 128, reason: 'StartError', message: error.message, startedAt: now, finishedAt: now, containerID: c.containerID})
      this.event(c, 'Warning', 'Failed', `Error: ${error.message}`)
      // The sync failed: a container that will be restarted waits with the runtime's error until the next sync, then backs off.
      c.waiting = {reason: 'RunContainerError', message: error.message}
      this.writeRecord()
      this.retrySyncLater()
      return
    }
    // Not seen before its program runs (a sandbox is still being built), and then at the next relist.
    c.unobserved = {until: Infinity, status: before}
    c.proc = proc
    this.publishWhenObserved()
    c.runningImage = c.spec.image
    c.started = !c.spec.startupProbe
    c.ready = c.started && !c.spec.readinessProbe && c.kind !== 'init'
    this.event(c, 'Normal', 'Started', `Started container ${c.name}`)
    this.watchProcess(c, proc)
    const hctx = this.handlerContext(c, proc)
    const postStart = c.spec.lifecycle?.postStart
    await proc.entered()
    if (!postStart && c.proc === proc) {
      c.unobserved = {until: nextRelist(Date.now(), this.deps.sync), status: before}
      this.publishWhenObserved()
    }
    if (postStart) {
      // The kubelet runs the hook inside the sync that started the container, and a failed hook's kill too:
      // nothing of this start is reported until that sync is over.
      const r = await runHook(postStart, hctx, 2 ** 31 - 1, this.abort.signal)
      if (r.result === 'failure' && c.proc === proc && !this.abort.signal.aborted) {
        this.event(c, 'Warning', 'FailedPostStartHook', `PostStartHook failed`)
        c.pendingWaiting = {reason: 'PostStartHookError', message: hookErrorMessage(postStart, c.name, this.pod, r)}
        await this.stopContainer(c, `FailedPostStartHook`, this.podGraceMs(), {killingWhenExited: true})
        // The failed sync ends here; the container's exit brings the next one with the relist.
        this.configRetryAt = nextRelist(Date.now() + 1, this.deps.sync)
        this.scheduleWake(this.configRetryAt)
        return
      }
      if (c.proc === proc) {
        c.unobserved = {until: nextRelist(Date.now(), this.deps.sync), status: before}
        this.publishWhenObserved()
      }
    }
  }

  /** A started or adopted instance: its exit, its record, its probes. */
  private watchProcess(c: ContainerState, proc: ContainerProcess): void {
    void proc.exited.then((exit) => this.onExit(c, proc, exit))
    this.writeRecord()
    this.publish()
    // Probes enter a sandbox: not before it is set up.
    void proc.entered().then(() => {
      if (c.proc === proc && proc.exit === undefined) this.startProbes(c, proc, this.handlerContext(c, proc))
    })
  }

  /** Where the container's handlers (probes, hooks) run: its env and cwd, inside its namespaces when it has some. */
  private handlerContext(c: ContainerState, proc: ContainerProcess): HandlerContext {
    const enter = proc.enterArgv(proc.cwd)
    return {env: proc.env, cwd: proc.cwd, host: this.net.handlerHost, ports: c.spec.ports ?? [], ...(enter.length > 0 ? {enter} : {})}
  }

  /** The pod's shared PID namespace, started with its first container (the kubelet's pause container). */
  private async sharedPidNamespace(): Promise<PidNamespaceHolder> {
    if (holderAlive(this.pidHolder)) return this.pidHolder!
    const h = await startPidNamespaceHolder(containerHostname(this.pod))
    h.monitor.unref()
    // The pod's own process (the kubelet's pause container) lives in the pod cgroup.
    this.cgroup.placeInPod(this.pod, h.pid)
    this.pidHolder = {pid: h.pid, startTicks: h.startTicks}
    this.writeRecord()
    return this.pidHolder
  }

  /** The pod's /etc/hosts, /etc/resolv.conf and /etc/hostname (sandbox/pod-files.ts), in its sandbox dir. */
  private podFiles(): {hosts: string; resolvConf: string; hostname: string} {
    const dir = join(this.deps.sandbox, 'etc')
    return {hosts: join(dir, 'hosts'), resolvConf: join(dir, 'resolv.conf'), hostname: join(dir, 'hostname')}
  }

  /** Written once the volumes are set up, before any container starts (the kubelet writes them with the sandbox). */
  private writePodFiles(): void {
    if (this.deps.sandboxMode !== 'namespaces') return
    const files = this.podFiles()
    mkdirSync(dirname(files.hosts), {recursive: true, mode: 0o700})
    writeFileSync(files.hosts, hostsFile(this.pod, [this.net.attachment?.ip ?? this.deps.node.nodeIP]), {mode: 0o644})
    writeFileSync(files.resolvConf, resolvConf(this.pod, this.deps.dns), {mode: 0o644})
    writeFileSync(files.hostname, `${containerHostname(this.pod)}\n`, {mode: 0o644})
  }

  /**
   * After a vnode restart (adopt.ts): the containers as the record and /proc
   * found them. Live instances are watched again (exit, probes, logs); the
   * rest keep their last exit, and the next sync restarts them per
   * restartPolicy. Called before any sync pass.
   */
  restore(found: RestoredContainer[], links: RealLink[], pidHolder?: PidNamespaceHolder): void {
    if (holderAlive(pidHolder)) this.pidHolder = pidHolder
    for (const f of found) {
      const c = this.containers.find((x) => x.name === f.name)
      if (!c) continue
      c.instances = f.instances
      c.containerID = f.containerID
      c.logPath = f.logPath
      c.imageID = f.imageID ?? ''
      c.history = [...f.history]
      if (!f.proc) continue
      this.cgroup.adopt(c.name, f.cgroup, c.spec)
      c.proc = f.proc
      c.runningImage = c.spec.image
      c.started = !c.spec.startupProbe
      c.ready = c.started && !c.spec.readinessProbe && c.kind !== 'init'
      c.terminationMessageFile = terminationFileOf(this.deps.sandbox, c.spec, !!f.proc.sandboxed)
      this.watchProcess(c, f.proc)
    }
    this.links = [...links]
    this.refresh.track(this.pod)
    // Init containers are done once each completed, or once a regular container ran.
    this.initDone = this.regulars.some((c) => c.everRan) || this.inits.every((c) => (c.kind === 'sidecar' ? c.running : c.lastExit?.exitCode === 0 && !c.running))
    this.writeRecord()
    // Whoever registers for notifications next gets the restored status, even if unchanged.
    this.lastNotified = ''
  }

  /** The container could not be created on this sync: Failed on every sync, as the kubelet's startContainer records it. */
  private configFailed(c: ContainerState, reason: string, message: string, event = `Error: ${message}`): void {
    this.event(c, 'Warning', 'Failed', event)
    c.waiting = {reason, message}
    this.retrySyncLater()
  }

  private startProbes(c: ContainerState, proc: ContainerProcess, hctx: HandlerContext): void {
    for (const [kind, probe] of containerProbes(c)) {
      const w = new ProbeWorker(
        kind,
        probe,
        hctx,
        proc.startedAt,
        {
          started: () => c.started,
          onResult: (k, r) => this.onProbeResult(c, proc, k, r),
          event: (type, reason, message) => this.event(c, type, reason, message),
        },
        this.createdAt,
      )
      c.probes.push(w)
      w.start()
    }
  }

  private onProbeResult(c: ContainerState, proc: ContainerProcess, kind: ProbeKind, result: ProbeResult): void {
    if (c.proc !== proc) return
    const e = probeEffect(c, kind, result, {terminating: this.terminating !== undefined, restartPolicy: this.restartPolicy})
    if (e.effect === 'ready') c.ready = e.ready
    if (e.effect === 'started') {
      c.started = true
      c.ready = e.ready
      c.probes.find((p) => p.kind === 'readiness')?.trigger()
      void this.kick()
    }
    if (e.effect === 'kill') void this.stopContainer(c, e.message, e.graceMs ?? this.podGraceMs())
    this.publish()
  }

  private onExit(c: ContainerState, proc: ContainerProcess, exit: ExitInfo): void {
    for (const p of c.probes) p.stop()
    c.probes = []
    // The kernel's OOM accounting of the container's cgroup, read before the cgroup goes.
    const t = terminationOf(c, proc.startedAt, exit, this.cgroup.exited(c.name))
    if (c.pendingWaiting) {
      c.waiting = c.pendingWaiting
      c.pendingWaiting = undefined
    }
    c.pushTermination(t)
    c.proc = undefined
    c.unobserved = undefined
    c.started = false
    c.ready = c.kind === 'init' && exit.exitCode === 0
    this.writeRecord()
    this.publish()
    void this.kick()
  }

  // ---- stopping ----

  private podGraceMs(): number {
    const g = this.pod.metadata?.deletionGracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? DefaultTerminationGraceSeconds
    return Math.max(0, Number(g)) * 1000
  }

  /**
   * Stops one container: Killing event, preStop within the grace, SIGTERM to
   * its process group, SIGKILL at the deadline (never sooner than 2 s after
   * SIGTERM). A second call can only move the deadline closer. An instance
   * whose main process has exited (its output still draining) gets no
   * Killing and no preStop, as the kubelet kills only running containers;
   * what it left in its process group or cgroup still goes. A failed
   * postStart hook's kill has its Killing all the same: the kubelet kills
   * the container it just started without asking the runtime its state.
   */
  private stopContainer(c: ContainerState, message: string, graceMs: number, {killingWhenExited = false} = {}): Promise<void> {
    c.stopDeadline.moveTo(Math.min(Date.now() + graceMs, this.podDeadline))
    if (c.stopping) return c.stopping
    const proc = c.proc
    if (!proc) return Promise.resolve()
    const running = proc.running
    if (running || killingWhenExited) this.event(c, 'Normal', 'Killing', message)
    c.stopping = (async () => {
      const preStop = c.spec.lifecycle?.preStop
      if (running && preStop && c.stopDeadline.at > Date.now()) {
        const hookAbort = new AbortController()
        const hook = runHook(preStop, this.handlerContext(c, proc), Math.max(0, c.stopDeadline.at - Date.now()), hookAbort.signal)
        // The hook ends, the container exits by itself, or the deadline (which may move closer meanwhile) passes.
        await Promise.race([hook, proc.exited, c.stopDeadline.passed()])
        hookAbort.abort()
        const r = await hook
        if (r.result === 'failure' && proc.exit === undefined) this.event(c, 'Warning', 'FailedPreStopHook', 'PreStopHook failed')
      }
      const sigtermAt = Date.now()
      await proc.terminate(() => Math.max(c.stopDeadline.at, sigtermAt + MinimumKillGraceMs))
      // Whatever escaped the process group is still in the container's cgroup.
      await this.cgroup.drained(c.name)
    })()
    return c.stopping.finally(() => {
      c.stopping = undefined
      c.stopDeadline.reset()
      void this.kick()
    })
  }

  /** Nothing more will start: stop the sidecars (reverse order) and settle. */
  private async finish(): Promise<void> {
    this.finished = true
    this.clearWake()
    await Promise.all(this.ephemerals.map((c) => this.stopContainer(c, `Stopping container ${c.name}`, this.podGraceMs())))
    for (const c of [...this.sidecars].reverse()) await this.stopContainer(c, `Stopping container ${c.name}`, this.podGraceMs())
    this.publish()
  }

  /**
   * Terminates the pod: regular (and running init) containers in parallel,
   * then sidecars in reverse order, all within gracePeriodSeconds. Called
   * again with a shorter grace, the deadline moves closer.
   */
  terminate(gracePeriodSeconds: number): Promise<void> {
    const deadline = Date.now() + Math.max(0, gracePeriodSeconds) * 1000
    this.podDeadline = Math.min(this.podDeadline, deadline)
    for (const c of this.containers) if (c.stopping) c.stopDeadline.moveTo(this.podDeadline)
    if (this.terminating) return this.terminating
    this.finished = true
    this.clearWake()
    this.abort.abort()
    for (const c of this.containers) for (const p of c.probes) if (p.kind !== 'readiness') p.stop()
    this.terminating = (async () => {
      await this.loop
      const graceLeft = () => Math.max(0, this.podDeadline - Date.now())
      await Promise.all(this.containers.filter((c) => c.kind !== 'sidecar').map((c) => this.stopContainer(c, `Stopping container ${c.name}`, graceLeft())))
      for (const c of [...this.sidecars].reverse()) await this.stopContainer(c, `Stopping container ${c.name}`, graceLeft())
      await Promise.all(this.containers.map((c) => c.stopping))
      // The pod core's TerminatePod decides which of the containers that never ran count as lost.
      for (const c of this.containers) {
        // Nothing will start again: a deleted pod's containers show no reason to wait (ShouldContainerBeRestarted is false),
        // and only their newest instance (the kubelet's terminating status has no older one).
        c.waiting = undefined
        c.pendingWaiting = undefined
        if (c.history.length > 1) c.history.length = 1
        // A completed init container stays ready, as the kubelet reports it to the end.
        if (c.kind !== 'init') c.ready = false
      }
      await this.cgroup.removePod(this.pod)
      stopPidNamespaceHolder(this.pidHolder)
      this.pidHolder = undefined
      await this.unmountVolumes()
      await this.net.release().catch(() => undefined)
      this.writeRecord()
      this.publish()
    })()
    return this.terminating
  }

  /**
   * No process can use the volumes any more: remove them (Secret content
   * above all) and the real mountPath links now, as the kubelet's
   * SyncTerminatedPod unmounts before the pod's final status and deletion.
   * Logs and the record stay until cleanup.
   */
  private async unmountVolumes(): Promise<void> {
    await this.refresh.release()
    await removeRealLinks(this.links)
    this.links = []
    await removeTree(volumesDir(this.deps.sandbox))
  }

  /** The container GC: of each container's dead instances only the newest is kept (it is the lastState of a running one). */
  collectDeadInstances(): void {
    if (this.closed) return
    for (const c of this.containers) if (c.history.length > 1) c.history.length = 1
    this.publish()
  }

  /** No process of the pod is left. */
  get quiet(): boolean {
    return this.containers.every((c) => !c.running)
  }

  /** Forgets the pod: sandbox, volumes (secrets), real mountPath links, logs. */
  async cleanup(): Promise<void> {
    await this.close()
    await removeRealLinks(this.links)
    await removeTree(this.deps.sandbox)
    await removeTree(podLogDir(this.deps.ctx.stateDir, this.pod.metadata!.namespace!, this.pod.metadata!.name!, this.uid))
    this.deps.ctx.recorder.forget(this.uid)
  }

  /** Kills whatever still runs (grace 0) and stops every timer; the record stays for adoption. */
  async close(): Promise<void> {
    if (!this.terminating) await this.terminate(0)
    else await this.terminating
    this.closed = true
    this.clearWake()
    if (this.observeTimer) clearTimeout(this.observeTimer)
    await this.refresh.release()
    for (const c of this.containers) for (const p of c.probes) p.stop()
  }

  // ---- reporting ----

  /** The waiting reason of a container that has not started: PodInitializing while the pod has init containers. */
  private defaultWaiting(): string {
    return (this.pod.spec?.initContainers?.length ?? 0) > 0 ? 'PodInitializing' : 'ContainerCreating'
  }

  /** A start shows at the relist that sees it: publish then (the earliest unseen start first). */
  private publishWhenObserved(): void {
    if (this.observeTimer) clearTimeout(this.observeTimer)
    this.observeTimer = undefined
    const pending = this.containers
      .filter((x) => x.proc && !x.observed())
      .map((x) => x.unobserved!.until)
      .filter(Number.isFinite)
    if (pending.length === 0 || this.closed) return
    this.observeTimer = setTimeout(
      () => {
        this.observeTimer = undefined
        this.publish()
        this.publishWhenObserved()
      },
      Math.max(0, Math.min(...pending) - Date.now()) + 1,
    )
  }

  status(): V1PodStatus {
    const def = this.defaultWaiting()
    const status: V1PodStatus = {
      ...this.pod.status,
      initContainerStatuses: this.inits.map((c) => c.status(def)),
      containerStatuses: this.regulars.map((c) => c.status(def)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    }
    if ((this.pod.spec?.initContainers?.length ?? 0) === 0) delete status.initContainerStatuses
    if (this.ephemerals.length > 0) status.ephemeralContainerStatuses = this.ephemerals.map((c) => c.status('ContainerCreating'))
    this.cgroup.reportResources(this.pod, status, (name) => this.containers.find((c) => c.name === name)?.running ?? false)
    if (this.outcome) Object.assign(status, this.outcome)
    Object.assign(status, this.net.statusFields())
    // The kubelet creates the sandbox only once the volumes are mounted: until then, none (and no IP).
    if (!this.volumes && this.mountFailures > 0) {
      status.conditions = [...(status.conditions ?? []).filter((c) => c.type !== 'PodReadyToStartContainers'), {type: 'PodReadyToStartContainers', status: 'False', reason: SandboxWaitingReason}]
    }
    return status
  }

  snapshot(): V1Pod {
    return structuredClone({...this.pod, status: this.status()})
  }

  private publish(): void {
    if (this.closed) return
    const pod = this.snapshot()
    const text = JSON.stringify(pod.status)
    if (text === this.lastNotified) return
    this.lastNotified = text
    this.deps.notify(pod)
  }

  private event(c: ContainerState, type: 'Normal' | 'Warning', reason: string, message: string): void {
    void this.deps.ctx.recorder.record(c.ref(this.pod), type, reason, message)
  }

  record(): PodRecord {
    const m = this.pod.metadata!
    return {
      version: 1,
      uid: this.uid,
      namespace: m.namespace!,
      name: m.name!,
      sandbox: this.deps.sandbox,
      links: this.links,
      ...(this.pidHolder ? {pidHolder: this.pidHolder} : {}),
      updatedAt: new Date().toISOString(),
      pod: this.pod,
      containers: this.containers.map((c) => containerRecord(c, c.proc ? this.cgroup.containerPath(c.name) : undefined)),
    }
  }

  private writeRecord(): void {
    if (this.closed) return
    try {
      writePodRecord(this.record())
    } catch {
      // The sandbox is gone (cleanup raced an exit): nothing to record.
    }
  }
}
