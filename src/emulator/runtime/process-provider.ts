import {podKey} from '../../common/pods.js'
import {EventReason} from '../kube/event-reasons.js'
import type {V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {cpus, totalmem} from 'node:os'
import type {Duplex} from 'node:stream'
import {notFound} from '../provider/errdefs.js'
import type {PodLifecycleHandler, ProviderContext} from '../provider/handler.js'
import type {SandboxPoolFigures} from '../provider/pool.js'
import type {ContainerLog, ContainerLogRefusal, ContainerLogs} from '../provider/logs.js'
import {CriContainerLogs} from './logs/container-logs.js'
import {type ContainerRef, type ContainerStreaming, ExitCodeError, type StreamIO} from '../provider/streaming.js'
import {attachToProcess} from './container/attach.js'
import {dialInNetns} from './network/port-dial.js'
import {ExecGroups, startExec} from './container/exec.js'
import type {ContainerProcess} from './process/container-process.js'
import {DefaultCrashLoopTiming, type CrashLoopTiming} from './container/crash-loop.js'
import type {NodeFacts} from './env/env.js'
import {ImageMap} from './images/image-map.js'
import {defaultImageMap} from './images/default-images.js'
import {DefaultLogMaxBytes, DefaultLogMaxFiles, type LogRotation} from './logs/writer.js'
import {podSandbox} from './pod/record.js'
import {findPodRecords, killRecorded, restoreContainer} from './pod/adoption.js'
import {removeTree} from '../../common/remove-tree.js'
import {PodWork} from './pod-work.js'
import {prepareStateDir} from './state-dir.js'
import {DefaultClusterDomain, type PodDNS} from './sandbox/pod-files.js'
import type {SandboxMode, SandboxWalls} from './sandbox/spec.js'
import {retiringLayers} from './sandbox/pod-sandbox.js'
import {hiddenLayerPlan, SandboxMountBase} from './sandbox/mount-base.js'
import {PodRuntime} from './pod/pod-runtime.js'
import {DefaultMountRetryInitialMs, DefaultMountRetryMaxMs, DefaultSyncClock, type SyncClock} from './pod/sync-clock.js'
import type {PodUsage} from './process/usage.js'
import {podsUsage} from './pod/usage.js'
import {ServiceAccountTokens} from './volumes/tokens.js'
import type {VolumeRefreshOptions} from './volumes/refresh.js'
import type {CgroupSupport} from './cgroups/detect.js'
import {NodeCgroups} from './cgroups/node-cgroups.js'
import {NetnsDir, type PodNetwork} from './network/pod-network.js'
import {portConflictMessage, processGroupOf, takenPorts} from './network/port-conflict.js'
import type {ContainerState} from './container/state.js'

/**
 * The kubelet's ContainerGCPeriod: every minute its container GC removes the dead instances of each container
 * but the newest (MaxPerPodContainer 1), so older exits stop showing (a deleted crash-looping container has no
 * lastState once the GC has run). */
export const DefaultContainerGCPeriodMs = 60_000

export interface ProcessProviderOptions {
  /** The `--images` file; ignored when `images` is given. */
  imagesFile?: string
  images?: ImageMap
  /** Containers' default PATH (`up` passes its own); the runtimes' minimal one when unset. */
  path?: string
  rotation?: Partial<LogRotation>
  crashLoop?: Partial<CrashLoopTiming>
  /** Retries of volumes that did not mount, and of failed syncs (no sooner than initialMs); the kubelet's clocks when unset. */
  configRetry?: {initialMs: number; maxMs: number}
  /** The kubelet's relist period and sync back-off (sync-clock.ts). */
  sync?: Partial<SyncClock>
  /** How often dead instances beyond the newest of each container are forgotten (the kubelet's container GC); 0: never. */
  containerGCPeriodMs?: number
  /** CPU cores / memory bytes resourceFieldRef reports for unset limits (default: the host's). */
  cpuCores?: number
  memoryBytes?: number
  /** How often an adopted process is checked for its end (adopt.ts). */
  adoptPollMs?: number
  volumeRefresh?: VolumeRefreshOptions
  /** The token manager's clock (tests move it to see tokens rotated). */
  tokenClock?: () => number
  /** What cgroups the host allows (cgroups/detect.ts); mode none is the plain mode, with a Warning per pod with limits. Unset: no cgroups, no warnings. */
  cgroups?: CgroupSupport
  /** The kubelet's podPidsLimit (pids.max of each pod cgroup); -1 or unset: none. */
  podPidsLimit?: number
  /** The node's pod network (network/): a namespace and address per non-hostNetwork pod; hostNetworkReason: why there is none. */
  network?: PodNetwork
  hostNetworkReason?: string
  /** What pods run inside (sandbox/): `namespaces` (detectSandbox decides) or `none`, the default here. */
  sandbox?: SandboxMode
  /** The sandbox's walls (namespaces mode): how writable layers are built, what is hidden. */
  walls?: SandboxWalls
  /** The cluster DNS pods' resolv.conf names (sandbox mode). */
  dns?: Partial<PodDNS>
  /** Where the node's notes go (a sandbox's mount base that could not be made). */
  log?: (line: string) => void
}

/**
 * The process runtime: every container of every pod is a local OS process
 * (pod-runtime.ts has the kubelet's container rules). Pod sandboxes live at
 * <stateDir>/pods/<uid>/, logs at <stateDir>/logs/ (log-layout.ts).
 */
export class ProcessProvider implements PodLifecycleHandler, ContainerStreaming, ContainerLogs {
  private readonly pods = new Map<string, PodRuntime>()
  private gcTimer: NodeJS.Timeout | undefined
  private readonly execGroups = new ExecGroups()
  private callback: (pod: V1Pod) => void = () => undefined
  private images: ImageMap
  private readonly node: NodeFacts
  private loaded: Promise<void> | undefined
  private adopted: Promise<void> | undefined
  private closed = false
  private readonly tokens: ServiceAccountTokens
  /** The node's cgroup tree, where the host allows one. */
  readonly cgroups: NodeCgroups | undefined
  /** As root in a sandbox: the mount namespace sandboxed starts begin from (sandbox/mount-base.ts). */
  private mountBase: SandboxMountBase | undefined
  /** The node's work beside its pods' (the pool's refill, the pipes' reserve, the heap trim), held off by their starts and stops. */
  private readonly podWork: PodWork

  constructor(
    private readonly ctx: ProviderContext,
    private readonly opts: ProcessProviderOptions = {},
  ) {
    this.images = opts.images ?? defaultImageMap()
    this.podWork = new PodWork(ctx.stateDir, opts.network)
    this.tokens = new ServiceAccountTokens(ctx.core, {now: opts.tokenClock})
    if (!opts.images && opts.imagesFile) {
      this.loaded = ImageMap.load(opts.imagesFile).then((m) => {
        this.images = m.over(defaultImageMap())
      })
    }
    this.node = {
      nodeName: ctx.nodeName,
      nodeIP: ctx.nodeIP,
      apiServer: ctx.apiServer,
      cpuCores: opts.cpuCores ?? cpus().length,
      memoryBytes: opts.memoryBytes ?? totalmem(),
      ephemeralStorageBytes: 0,
    }
    const gcPeriod = opts.containerGCPeriodMs ?? DefaultContainerGCPeriodMs
    if (gcPeriod > 0) {
      this.gcTimer = setInterval(() => {
        for (const rt of this.pods.values()) rt.collectDeadInstances()
      }, gcPeriod)
      this.gcTimer.unref()
    }
    if (opts.cgroups && opts.cgroups.mode !== 'none') {
      this.cgroups = new NodeCgroups(opts.cgroups, {nodeName: ctx.nodeName, stateDir: ctx.stateDir, cpuCores: this.node.cpuCores, memoryBytes: this.node.memoryBytes, podPidsLimit: opts.podPidsLimit})
    }
  }

  get sandboxMode(): SandboxMode {
    return this.opts.sandbox ?? 'none'
  }

  /** Builds the provider and loads its image map, so a bad --images file fails at startup. */
  static async create(ctx: ProviderContext, opts: ProcessProviderOptions = {}): Promise<ProcessProvider> {
    const p = new ProcessProvider(ctx, opts)
    await p.ready()
    return p
  }

  /** Once (every createPod waits for it): the state dir's trees, the node's storage, adoption, the pipes and the pool. */
  async ready(): Promise<void> {
    await this.loaded
    this.adopted ??= (async () => {
      const storageBytes = await prepareStateDir(this.ctx.stateDir)
      if (storageBytes !== undefined) this.node.ephemeralStorageBytes = storageBytes
      this.cgroups?.setUp()
      if (this.sandboxMode === 'namespaces' && process.getuid?.() === 0) this.mountBase = await SandboxMountBase.start(NetnsDir, this.opts.log, hiddenLayerPlan(this.ctx.stateDir, this.opts.walls))
      if (this.closed) this.mountBase?.close()
      await this.adoptRecorded()
      // In the background: a start before the reserve is made has its pipes made as it comes.
      if (!this.closed) void this.podWork.fifos.prepare().catch((error: unknown) => this.opts.log?.(`cannot make spare output pipes: ${(error as Error).message}`))
      // After the pods' adoption: attachments no pod took over go; pool entries an adopted pod's record names are the
      // pod's, the others are reclaimed or destroyed.
      await this.opts.network?.start(new Set(this.pods.keys()))
    })()
    await this.adopted
  }

  /**
   * Takes over the pods a previous vnode left running (adopt.ts), before the
   * pod core asks for anything: it finds them with getPod and goes on; pods
   * gone from the API are terminated by the pod core's orphan check.
   */
  private async adoptRecorded(): Promise<void> {
    for (const record of findPodRecords(this.ctx.stateDir)) {
      if (this.pods.has(record.uid)) continue
      if (!record.pod?.metadata?.uid || !record.pod.spec) {
        // Nothing to rebuild the pod from: kill what runs; the sandbox goes with it.
        killRecorded(record)
        await removeTree(record.sandbox)
        continue
      }
      const rt = this.newRuntime(record.pod)
      await rt.sandbox.net.adopt()
      rt.restore(
        record.containers.map((c) => restoreContainer(c, this.rotation(), this.opts.adoptPollMs, this.cgroups)),
        record.links ?? [],
        record.pidHolder,
      )
      this.pods.set(rt.uid, rt)
    }
    // Cgroups of pods and instances nothing adopted: whatever is in them is killed, and they go.
    const rts = [...this.pods.values()]
    await this.cgroups?.sweep(new Set(rts.map((rt) => rt.uid)), new Set(rts.flatMap((rt) => rt.containers.flatMap((c) => rt.sandbox.cgroup.containerPath(c.name) ?? []))))
  }

  async createPod(pod: V1Pod): Promise<void> {
    if (this.closed) throw new Error('the process provider is closed')
    await this.ready()
    const existing = this.pods.get(pod.metadata!.uid!)
    if (existing) return existing.update(pod)
    const rt = this.newRuntime(pod)
    this.pods.set(rt.uid, rt)
    // Until its start is seen, the warm pool does not refill beside it (a refill's plugins take the CPU its sandbox needs).
    await this.podWork.holding(() => rt.start())
  }

  private rotation(): LogRotation {
    return {maxBytes: this.opts.rotation?.maxBytes ?? DefaultLogMaxBytes, maxFiles: this.opts.rotation?.maxFiles ?? DefaultLogMaxFiles}
  }

  /** The kubelet's clocks; a shorter crash-loop or config retry (tests) shortens the sync back-off with it. */
  private syncClock(crashLoop: CrashLoopTiming): SyncClock {
    const clock = {...DefaultSyncClock, ...this.opts.sync}
    const syncBackoffMs = Math.min(clock.syncBackoffMs, crashLoop.initialMs, this.opts.configRetry?.initialMs ?? Infinity)
    return {...clock, syncBackoffMs}
  }

  private newRuntime(pod: V1Pod): PodRuntime {
    const crashLoop = {...DefaultCrashLoopTiming, ...this.opts.crashLoop}
    return new PodRuntime(pod, {
      ctx: this.ctx,
      images: this.images,
      node: this.node,
      rotation: this.rotation(),
      crashLoop,
      mountRetry: this.opts.configRetry ?? {initialMs: DefaultMountRetryInitialMs, maxMs: DefaultMountRetryMaxMs},
      sync: this.syncClock(crashLoop),
      sandbox: podSandbox(this.ctx.stateDir, pod.metadata!.uid!),
      tokens: this.tokens,
      volumeRefresh: this.opts.volumeRefresh,
      path: this.opts.path,
      cgroups: this.cgroups,
      limitsNotEnforced: this.opts.cgroups?.mode === 'none' ? this.opts.cgroups.reason : undefined,
      allocatable: {cpuCores: this.node.cpuCores, memoryBytes: this.node.memoryBytes},
      // A pod network needs the sandbox: its containers are spawned inside the pod's namespace.
      network: pod.spec?.hostNetwork || this.sandboxMode !== 'namespaces' ? undefined : this.opts.network,
      checkHostPorts: (p, c) => this.checkHostPorts(p, c),
      sandboxMode: this.sandboxMode,
      walls: this.opts.walls,
      dns: {clusterDNS: this.opts.dns?.clusterDNS ?? [], clusterDomain: this.opts.dns?.clusterDomain ?? DefaultClusterDomain},
      mountBase: (binds) => this.mountBase?.pathFor(binds),
      fifos: this.podWork.fifos,
      notify: (p) => this.callback(p),
    })
  }

  /**
   * Per-pod state held: the pods' runtimes (a pod is forgotten by cleanupPod), earlier instances' layers still being
   * removed and gone pods' addresses still being given back; tests check it returns to zero.
   */
  get size(): number {
    return this.pods.size + retiringLayers() + (this.opts.network?.addressesReturning ?? 0)
  }

  async updatePod(pod: V1Pod): Promise<void> {
    const rt = this.find(pod)
    if (!rt) throw notFound(`pod ${pod.metadata?.namespace}/${pod.metadata?.name} is not running on this node`)
    await rt.update(pod)
  }

  async deletePod(pod: V1Pod, gracePeriodSeconds: number): Promise<void> {
    const rt = this.find(pod)
    if (!rt) throw notFound(`pod ${pod.metadata?.namespace}/${pod.metadata?.name} is not running on this node`)
    await this.podWork.holding(() => rt.terminate(gracePeriodSeconds, {deleted: !!pod.metadata?.deletionTimestamp}))
  }

  async cleanupPod(pod: V1Pod): Promise<void> {
    const rt = this.find(pod)
    if (!rt) return
    await this.podWork.holding(() => rt.cleanup())
    this.pods.delete(rt.uid)
  }

  async getPod(namespace: string, name: string): Promise<V1Pod | undefined> {
    return this.byName(namespace, name)?.snapshot()
  }

  async getPodStatus(namespace: string, name: string): Promise<V1PodStatus | undefined> {
    return this.byName(namespace, name)?.status()
  }

  /** The container's CRI log, the file chosen from the pod as the node last wrote its status. */
  getContainerLogs(ref: ContainerRef, previous: boolean): ContainerLog | ContainerLogRefusal {
    return new CriContainerLogs(this.ctx.stateDir, this.ctx.knownPod).getContainerLogs(ref, previous)
  }

  async getPods(): Promise<V1Pod[]> {
    return [...this.pods.values()].map((p) => p.snapshot())
  }

  notifyPods(callback: (pod: V1Pod) => void): void {
    this.callback = callback
  }

  /** Per-container CPU, memory and process count: from the cgroups' accounting where there are cgroups, else from /proc. */
  usage(): PodUsage[] {
    return podsUsage([...this.pods.values()], this.cgroups)
  }

  /** Full collections run to give a burst's heap back (/metrics). */
  heapTrims(): number {
    return this.podWork.heapTrims
  }

  /** The warm pool of pod network sandboxes; undefined without a pod network. */
  pool(): SandboxPoolFigures | undefined {
    return this.opts.network?.poolFigures()
  }

  // ---- exec and attach (ContainerStreaming) ----

  isContainerRunning(ref: ContainerRef): boolean {
    return this.runningProcess(ref) !== undefined
  }

  async execInContainer(ref: ContainerRef, command: string[], io: StreamIO): Promise<void> {
    const proc = this.runningProcess(ref)
    if (!proc) throw notFound(`container not found (${JSON.stringify(ref.container)})`)
    await proc.entered()
    const rt = this.byName(ref.namespace, ref.pod)
    // In a sandbox the command joins the container's cgroups before it runs (sandbox/spawn.ts enterArgv).
    const enter = proc.enterArgv(proc.cwd, rt?.sandbox.cgroup.containerProcsFiles(ref.container) ?? [])
    const handle = await startExec(command, {env: proc.env, cwd: proc.cwd, ...(enter.length > 0 ? {sandbox: {enter, root: `/proc/${proc.pid}/root`}} : {})}, io)
    this.execGroups.track(proc, handle.pgid)
    // An exec'd command counts against the container's limits, as in its cgroup under the kubelet.
    const cgroup = rt?.sandbox.cgroup.containerPath(ref.container)
    if (cgroup && enter.length === 0) {
      try {
        await this.cgroups?.placeTree(cgroup, handle.pgid)
      } catch {
        /* it already ended */
      }
    }
    const code = await handle.done
    // A group that is already empty is forgotten at once, so its id is never signalled after reuse.
    this.execGroups.ended(proc, handle.pgid)
    if (code !== 0) throw new ExitCodeError(code, `command '${command.join(' ')}' exited with ${code}`)
  }

  async attachToContainer(ref: ContainerRef, io: StreamIO): Promise<void> {
    const c = this.byName(ref.namespace, ref.pod)?.containers.find((x) => x.name === ref.container)
    const proc = this.runningProcess(ref)
    if (!c || !proc) throw notFound(`container ${ref.container} not found in pod ${ref.pod}_${ref.namespace}`)
    await attachToProcess(proc, {stdin: c.spec.stdin === true, stdinOnce: c.spec.stdinOnce === true}, io)
  }

  /** Port-forward inside the pod's own network namespace (network/port-dial.ts); undefined on the host's network. */
  dialPodPort(uid: string, port: number, timeoutMs: number): Promise<Duplex> | undefined {
    const netns = this.pods.get(uid)?.sandbox.net.netns
    return netns ? dialInNetns(netns, port, timeoutMs) : undefined
  }

  private runningProcess(ref: ContainerRef): ContainerProcess | undefined {
    const proc = this.byName(ref.namespace, ref.pod)?.containers.find((c) => c.name === ref.container)?.proc
    return proc && proc.exit === undefined ? proc : undefined
  }

  /** Kills whatever still runs and stops every timer; records stay on disk. */
  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.gcTimer)
    this.execGroups.killAll()
    await Promise.all([...this.pods.values()].map((p) => p.close()))
    this.pods.clear()
    await this.cgroups?.close()
    this.mountBase?.close()
    await this.podWork.close()
    await this.opts.network?.close()
  }

  /** On the host network: a Warning per declared TCP containerPort the host already listens on, naming its pod. */
  private async checkHostPorts(pod: V1Pod, c: ContainerState): Promise<void> {
    const ports = (c.spec.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP').map((p) => p.containerPort)
    for (const taken of await takenPorts(ports)) {
      const pgid = taken.pid ? await processGroupOf(taken.pid) : undefined
      const holder = [...this.pods.values()].find((rt) => rt.containers.some((x) => x.proc && x.proc.exit === undefined && x.proc.pgid === pgid))
      const who = holder ? `pod ${holder.key}` : taken.pid ? `process ${taken.pid}${taken.comm ? ` (${taken.comm})` : ''}` : 'another process'
      void this.ctx.recorder.record(c.ref(pod), 'Warning', EventReason.PortInUse, portConflictMessage(taken.port, who, c.spec.ports, this.opts.hostNetworkReason))
    }
  }

  private find(pod: V1Pod): PodRuntime | undefined {
    return this.pods.get(pod.metadata?.uid ?? '') ?? this.byName(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '')
  }

  /** The pod of that name; a live one over one still terminating under the same name. */
  private byName(namespace: string, name: string): PodRuntime | undefined {
    const all = [...this.pods.values()].filter((p) => p.key === podKey(namespace, name))
    return all.find((p) => !p.isTerminating) ?? all.at(-1)
  }
}
