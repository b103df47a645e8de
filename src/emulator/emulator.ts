import type {V1Node, V1Pod} from '@kubernetes/client-node'
import {EventEmitter} from 'node:events'
import {mkdir} from 'node:fs/promises'
import {UserError} from '../errors.js'
import {ServingCertAnnotation} from '../common/labels.js'
import {defaultStateDir, DefaultShutdownGraceSeconds, nodeSpecConfig, validateNodeName, type EmulatorEvents, type EmulatorOptions, type EmulatorSummary} from './emulator-config.js'
import type {ServiceLister} from './kube/service-lister.js'
import type {ObjectManager} from './kube/object-manager.js'
import {makeClients, type KubeClients} from './kube/client.js'
import {describeApiError} from './kube/errors.js'
import {EventRecorder} from './kube/events.js'
import {EventReason} from './kube/event-reasons.js'
import {LeaseController} from './node/lease-controller.js'
import {NodeController, type NodeSnapshot} from './node/node-controller.js'
import {NodeWatcher} from './node/node-watcher.js'
import type {AdmissionNode} from './pods/admission.js'
import type {PodController} from './pods/pod-controller.js'
import type {PodLifecycleHandler, ProviderFactory} from './provider/handler.js'
import {hasContainerLogs, NoContainerLogs, type ContainerLogs} from './provider/logs.js'
import type {KubeletServer} from './server/server.js'
import {startKubeletServer} from './emulator-kubelet.js'
import type {PodUsage} from './provider/usage.js'
import type {SandboxPoolFigures} from './provider/pool.js'

export * from './emulator-config.js'

/**
 * One emulated node: wires the kube clients, node controller and lease
 * together, and offers a read-only feed of its state to whatever renders it.
 */
export class Emulator extends EventEmitter<EmulatorEvents> {
  private clients!: KubeClients
  private recorder!: EventRecorder
  private nodeController!: NodeController
  private lease!: LeaseController
  private provider: PodLifecycleHandler | undefined
  private podController: PodController | undefined
  private services: ServiceLister | undefined
  private objects: ObjectManager | undefined
  private nodeIP = ''
  private logs: ContainerLogs | undefined
  private kubeletServer: KubeletServer | undefined
  private relay: import('./relay/node-relay.js').NodeRelay | undefined
  /** Ends the loops (lease, status, watches). */
  private readonly abort = new AbortController()
  /** Ends a start that is still under way. */
  private readonly startAbort = new AbortController()
  private loops: Promise<void>[] = []
  readonly startedAt = new Date()
  lastLeaseRenewal: Date | undefined
  private readyAt: {time: number; requests: number} | undefined
  private starting: Promise<void> | undefined
  serverVersion = ''
  stateDir: string

  constructor(readonly opts: EmulatorOptions) {
    super()
    validateNodeName(opts.name)
    this.stateDir = opts.stateDir ?? defaultStateDir(opts.name)
  }

  get server(): string {
    return this.clients?.server ?? ''
  }

  get requestCount(): number {
    return this.clients?.counter.total ?? 0
  }

  summary(): EmulatorSummary {
    const now = Date.now()
    return {
      uptimeSeconds: (now - this.startedAt.getTime()) / 1000,
      requests: this.requestCount,
      requestsSinceReady: this.readyAt ? this.requestCount - this.readyAt.requests : 0,
      secondsSinceReady: this.readyAt ? (now - this.readyAt.time) / 1000 : 0,
      byMethod: Object.fromEntries(this.clients?.counter.byMethod ?? []),
      byResource: Object.fromEntries(this.clients?.counter.byResource ?? []),
      openWatches: this.clients?.counter.openWatches ?? 0,
      podState: {
        status: this.podController?.status.size ?? 0,
        workers: this.podController?.workers.size ?? 0,
        runtime: (this.provider as {size?: number} | undefined)?.size ?? 0,
      },
    }
  }

  /**
   * Emits the summary so far (request counts, open watches, per-pod state
   * sizes, memory). Run with --expose-gc, a full collection comes first, so
   * the heap figure is what is really held (the soak compares it).
   */
  reportStats(): void {
    ;(globalThis as {gc?: () => void}).gc?.()
    const m = process.memoryUsage()
    this.emit('stats', {...this.summary(), memory: {rssBytes: m.rss, heapUsedBytes: m.heapUsed}})
  }

  node(): NodeSnapshot | undefined {
    return this.nodeController?.snapshot()
  }

  /**
   * The node's container logs for the kubelet API and the dashboard: the
   * provider's (virtual-kubelet's GetContainerLogs), looked up per read as
   * the provider starts after the server; none before it or without one.
   */
  get containerLogs(): ContainerLogs {
    this.logs ??= this.opts.kubelet?.logs ?? {getContainerLogs: (ref, previous) => (hasContainerLogs(this.provider) ? this.provider : NoContainerLogs).getContainerLogs(ref, previous)}
    return this.logs
  }

  /** Per pod and container usage measured by the provider (empty when it measures none). */
  usage(): PodUsage[] {
    return this.provider?.usage?.() ?? []
  }

  /** The provider's warm pool of pod sandboxes; undefined when it keeps none. */
  pool(): SandboxPoolFigures | undefined {
    return this.provider?.pool?.()
  }

  /** The pods of this node, each with the status as last written (deep copies). */
  pods(): V1Pod[] {
    return this.podController?.pods() ?? []
  }

  /** Status PATCHes the pod status manager has sent (for tests and the request budget). */
  get podStatusWrites(): number {
    return this.podController?.status.writes ?? 0
  }

  /**
   * Connect, register, report Ready, and keep the lease and status loops
   * running. A stop() that comes while this runs makes it return early, and
   * stop() waits for it, so nothing starts after a stop.
   */
  start(): Promise<void> {
    this.starting ??= this.startSteps()
    return this.starting
  }

  private async startSteps(): Promise<void> {
    const stopped = () => this.startAbort.signal.aborted
    this.clients = await makeClients(this.opts)
    await this.connect()
    await mkdir(this.stateDir, {recursive: true, mode: 0o700})
    this.recorder = new EventRecorder(this.clients.events, this.opts.name)
    this.recorder.onEvent((e) => this.emit('event', e))
    const config = await nodeSpecConfig(this.opts, this.clients.server)
    this.nodeIP = config.nodeIP
    this.nodeController = new NodeController(this.clients.heartbeatCore, config, this.recorder, {
      stateDir: this.stateDir,
      reregister: this.opts.reregister,
      statusCheckIntervalMs: this.opts.statusCheckIntervalMs,
    })
    this.nodeController.on('change', (s: NodeSnapshot) => {
      this.emit('node', s)
      if (s.error) this.emit('error', s.error)
    })
    // The kubelet API starts beside the registration: its serving certificate (a CSR the cluster signs) needs no Node.
    const serving = startKubeletServer({
      opts: this.opts,
      clients: this.clients,
      stateDir: this.stateDir,
      config,
      provider: () => this.provider,
      pods: () => this.pods(),
      logs: this.containerLogs,
      log: (l) => this.emit('step', 'cert', l),
      servedCert: (what) => void this.nodeController.setAnnotation(ServingCertAnnotation, what).catch((e: Error) => this.emit('step', 'cert', `cannot annotate node ${this.opts.name}: ${e.message}`)),
    })
    // Handled here so a failure while the registration runs is not an unhandled rejection; awaited below.
    serving.catch(() => undefined)
    let node: V1Node
    try {
      node = await this.nodeController.register(this.startAbort.signal)
    } catch (error) {
      await serving.then((s) => s.stop()).catch(() => undefined)
      throw error
    }
    this.kubeletServer = await serving
    if (stopped()) return
    this.emit('step', 'register', `node ${this.opts.name} registered (InternalIP ${config.nodeIP}, port ${config.port})`)
    void this.recorder.record(this.nodeController.ref, 'Normal', EventReason.StartingKubelet, 'Starting vnode.')
    this.lease = new LeaseController(
      this.clients.coordination,
      {name: this.opts.name, uid: node.metadata!.uid!},
      {
        renewIntervalMs: this.opts.leaseRenewIntervalMs,
        onRenew: (at) => {
          this.lastLeaseRenewal = at
          this.emit('lease', at)
        },
        onError: (m) => this.emit('error', m),
        onLeaseLost: async () => {
          const n = await this.nodeController.ensureRegistered()
          return n ? {name: this.opts.name, uid: n.metadata!.uid!} : undefined
        },
      },
    )
    this.nodeController.on('registered', (n: V1Node) => {
      this.lease.setOwner({name: this.opts.name, uid: n.metadata!.uid!})
      this.emit('step', 'register', `node ${this.opts.name} re-registered`)
    })
    // The first lease and status write make the node Ready; do them before the
    // loops so `up` reports Ready at once and the start-up events are written
    // before the idle cost is counted.
    const renewedAt = await this.lease.renewOnce().catch(() => undefined)
    if (renewedAt) {
      this.lastLeaseRenewal = renewedAt
      this.emit('lease', renewedAt)
    }
    await this.nodeController.syncStatus(true)
    const parts = {clients: this.clients, nodeName: this.opts.name, nodeIP: config.nodeIP, kubeletPort: config.port, nodeController: this.nodeController, registered: node}
    if (this.opts.relay)
      this.relay = await (await import('./relay/endpoint.js')).startKubeletEndpoint(this.opts.relay, {...parts, kubeletServer: this.kubeletServer!, log: (l) => this.emit('step', 'relay', l)})
    await this.recorder.flush()
    if (stopped()) return
    const watcher = new NodeWatcher(
      {kc: this.clients.kc, core: this.clients.core, name: this.opts.name, counter: this.clients.counter},
      {
        modified: (n) => this.nodeController.observe(n),
        deleted: () => {
          this.nodeController.observeDeleted()
          void this.nodeController.ensureRegistered()
        },
      },
    )
    this.loops.push(this.lease.run(this.abort.signal, renewedAt), this.nodeController.run(this.abort.signal), watcher.run(this.abort.signal))
    if (this.opts.provider) await this.startPods(this.opts.provider)
    if (stopped()) return
    // The node watch's first request belongs to start-up, not to the idle cost.
    await new Promise((r) => setImmediate(r))
    this.readyAt = {time: Date.now(), requests: this.requestCount}
    this.emit('step', 'ready', `node ${this.opts.name} is Ready`)
  }

  /** Builds the provider and starts the pod controller (the node is registered). */
  private async startPods(factory: ProviderFactory): Promise<void> {
    const {ServiceLister} = await import('./kube/service-lister.js')
    this.services = new ServiceLister(this.clients.core, this.clients.kc, this.clients.counter)
    this.services.start()
    const {ObjectManager} = await import('./kube/object-manager.js')
    this.objects = new ObjectManager(this.clients.core, this.clients.kc, this.clients.counter)
    this.provider = await factory({
      nodeName: this.opts.name,
      nodeIP: this.nodeIP,
      apiServer: this.clients.server,
      stateDir: this.stateDir,
      core: this.clients.core,
      kc: this.clients.kc,
      services: this.services,
      objects: this.objects,
      recorder: this.recorder,
      knownPod: (namespace, name) => this.podController?.pod(namespace, name),
    })
    const {PodController} = await import('./pods/pod-controller.js')
    this.podController = new PodController({
      core: this.clients.core,
      statusWriter: {core: this.clients.preThrottledCore, throttle: () => this.clients.limiter.acquire()},
      kc: this.clients.kc,
      counter: this.clients.counter,
      nodeName: this.opts.name,
      nodeIP: this.nodeIP,
      provider: this.provider,
      recorder: this.recorder,
      node: this.admissionNode(),
      watchedNode: () => this.nodeController.watched(),
      resyncIntervalMs: this.opts.podResyncIntervalMs,
      statusCoalesceMs: this.opts.podStatusCoalesceMs,
      manifestsDir: this.opts.manifestsDir,
      virtualKubeletEvents: this.opts.virtualKubeletEvents ? this.objects : undefined,
    })
    this.podController.on('pod', (p) => this.emit('pod', p))
    this.podController.on('podRemoved', (uid) => this.emit('podRemoved', uid))
    this.podController.on('error', (m) => this.emit('error', m))
    // The node's pod count changed: let the node status loop look again (non-blocking).
    this.podController.on('count', () => this.nodeController.notify())
    await this.podController.start()
  }

  /** The Node as admission sees it: the watched copy, else our own view (not registered again yet). */
  private admissionNode(): () => Promise<AdmissionNode> {
    return async () => {
      const own = this.nodeController.config
      const allocatable = this.nodeController.snapshot().allocatable
      const n = this.nodeController.watched()
      const allowedNamespaces = this.opts.allowedNamespaces
      if (!n) return {name: own.name, labels: own.labels, taints: own.taints, allocatable, allowedNamespaces}
      return {name: this.opts.name, labels: n.metadata?.labels ?? {}, taints: n.spec?.taints ?? [], allocatable: (n.status?.allocatable ?? allocatable) as Record<string, string>, allowedNamespaces}
    }
  }

  /** Stop accepting pods, terminate them within their grace (bounded), stop the watch, close the provider. */
  private async stopPods(): Promise<void> {
    const pc = this.podController
    if (pc) {
      const grace = this.opts.shutdownGraceSeconds ?? DefaultShutdownGraceSeconds
      this.emit('stopping', `terminating pods (up to ${grace}s)`)
      try {
        if (!(await pc.shutdown(grace))) this.emit('error', 'stopping: some pods did not terminate in time')
      } finally {
        await pc.stop()
        this.podController = undefined
      }
    }
    const provider = this.provider
    this.provider = undefined
    await provider?.close?.()
    await this.services?.stop()
    this.services = undefined
    await this.objects?.stop()
    this.objects = undefined
  }

  private async connect(): Promise<void> {
    try {
      const info = await this.clients.version.getCode()
      this.serverVersion = info.gitVersion
    } catch (error) {
      throw new UserError(`cannot reach the API server at ${this.clients.server}: ${describeApiError(error)}`)
    }
    this.emit('step', 'connect', `connected to ${this.clients.server} (Kubernetes ${this.serverVersion})`)
  }

  /**
   * Stop, in the order of the kubelet's graceful node shutdown: report
   * Ready=False ("node is shutting down") and cordon first, so the scheduler
   * binds no replacement pod here, then terminate the pods while the lease
   * is still renewed. Then with rm, delete the Node and its Lease; otherwise
   * the Node stays NotReady and cordoned, its Lease left to expire as the
   * kubelet's does. The summary (the run's cost up to the stop) comes last.
   */
  async stop(opts: {rm?: boolean} = {}): Promise<void> {
    // A start still under way returns at its next step; then everything it started is stopped below.
    this.startAbort.abort()
    await this.starting?.catch(() => undefined)
    const summary = this.readyAt ? this.summary() : undefined
    try {
      await this.markShuttingDown()
      try {
        await this.stopPods()
      } catch (error) {
        this.emit('error', `stopping pods: ${describeApiError(error)}`)
      }
      this.abort.abort()
      await Promise.allSettled(this.loops)
      this.loops = []
      await this.relay?.stop()
      await this.kubeletServer?.stop()
      this.kubeletServer = undefined
      await this.removeNode(opts.rm === true)
    } finally {
      this.clients?.close()
      if (summary) this.emit('stopped', summary)
    }
  }

  /** Ready=False and cordoned, before any pod is terminated. */
  private async markShuttingDown(): Promise<void> {
    if (!this.nodeController) return
    this.emit('stopping', 'marking node NotReady and cordoning it')
    try {
      await this.nodeController.markStopped()
    } catch (error) {
      this.emit('error', `stopping: ${describeApiError(error)}`)
    }
  }

  /** With rm the Node and its Lease are deleted; the node's last events are written either way. */
  private async removeNode(rm: boolean): Promise<void> {
    if (!this.nodeController) return
    try {
      if (rm) {
        this.emit('stopping', 'deleting node and lease')
        await this.lease?.delete()
        await this.nodeController.deleteNode()
      }
      await this.recorder.flush()
    } catch (error) {
      this.emit('error', `stopping: ${describeApiError(error)}`)
    }
  }
}
