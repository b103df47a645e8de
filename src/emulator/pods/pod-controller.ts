import {isTerminalPhase, podKeyOf, podRef} from '../../common/pods.js'
import type {V1Node, V1ObjectReference, V1Pod} from '@kubernetes/client-node'
import {EventEmitter} from 'node:events'
import {resolve} from 'node:path'
import {type AdmissionNode, admitPod, NodeShutdownReason, NodeShutdownRejectMessage, RejectedMessagePrefix} from './admission.js'
import {ApiserverSource, FileSource as FileSourceName, isMirrorPod, isStaticPod, type PodOp, PodConfig} from './config.js'
import {FileSource, type ManifestProblem} from './file-source.js'
import {MirrorManager, type MirrorOwner} from './mirror.js'
import {PodWorkers} from './pod-workers.js'
import {PodSource} from './source.js'
import {StatusManager} from './status-manager.js'
import type {StatusOverride} from './status.js'
import {FailedValidationReason, NodeShutdownOverride, OrphanGracePeriodSeconds, type PodControllerEvents, type PodControllerOptions} from './pod-controller-options.js'
import {virtualKubeletEnvEvents} from './virtual-kubelet-events.js'
import type {ObjectLookup} from '../kube/object-manager.js'

export * from './pod-controller-options.js'

/**
 * Wires the pod data path: API source -> config ops -> admission -> pod
 * workers -> provider (deep copies) -> notifyPods -> status manager -> API.
 */
export class PodController extends EventEmitter<PodControllerEvents> {
  /** The API source's pods. */
  readonly config = new PodConfig()
  /** The manifest files' pods (static pods), when a manifest directory is set. */
  readonly fileConfig: PodConfig | undefined
  readonly status: StatusManager
  readonly workers: PodWorkers
  readonly mirrors: MirrorManager
  readonly fileSource: FileSource | undefined
  private readonly source: PodSource
  /** Sources configured, and those whose first complete listing has gone through (kubelet sourcesReady). */
  private readonly sources: Set<string>
  private readonly seen = new Set<string>()
  /** REMOVEs held back until every source has been seen (deletePod refuses before that). */
  private readonly deferredRemoves = new Map<string, V1Pod>()
  /** Static pods removed from their source whose worker still terminates, by UID: their mirror stays meanwhile. */
  private readonly removedStatic = new Map<string, string>()
  private readonly nodeRef: V1ObjectReference
  private readonly abort = new AbortController()
  private running: Promise<void> | undefined
  private chain: Promise<void> = Promise.resolve()
  private accepting = true
  private lastCount = 0
  private orphansChecked = false

  constructor(private readonly opts: PodControllerOptions) {
    super()
    this.nodeRef = {kind: 'Node', apiVersion: 'v1', name: opts.nodeName, uid: opts.nodeName}
    this.sources = new Set([ApiserverSource, ...(opts.manifestsDir ? [FileSourceName] : [])])
    this.fileConfig = opts.manifestsDir ? new PodConfig(undefined, FileSourceName) : undefined
    this.mirrors = new MirrorManager({
      core: opts.core,
      owner: opts.nodeOwner ?? (() => this.readOwner()),
      staticPod: (name) => this.fileConfig?.values().find((p) => podKeyOf(p) === name),
      terminating: (name) => [...this.removedStatic.values()].includes(name),
      sourcesReady: () => this.sourcesReady,
      onMirrorChanged: (name) => this.mirrorChanged(name),
      onError: (m) => this.emit('error', m),
      retryInitialMs: opts.mirrorRetryInitialMs,
    })
    this.status = new StatusManager(opts.statusWriter?.core ?? opts.core, {
      throttle: opts.statusWriter?.throttle,
      mirrorTarget: (pod) => this.mirrors.target(pod),
      nodeIP: opts.nodeIP,
      coalesceMs: opts.statusCoalesceMs,
      transitionHoldMs: opts.transitionHoldMs,
      clock: opts.clock,
      hooks: {
        couldHaveRunningContainers: (uid) => this.workers.couldHaveRunningContainers(uid),
        inTransition: (uid) => this.workers.inTransition(uid),
      },
      onChange: (pod) => this.emit('pod', pod),
      onError: (m) => this.emit('error', m),
    })
    this.workers = new PodWorkers(
      {
        provider: opts.provider,
        status: this.status,
        event: (pod, type, reason, message) => void opts.recorder.record(podRef(pod), type, reason, message),
        created: opts.virtualKubeletEvents ? (pod) => void this.virtualKubeletEvents(pod, opts.virtualKubeletEvents!) : undefined,
        resyncIntervalMs: opts.resyncIntervalMs,
        clock: opts.clock,
      },
      (uid) => this.forgotten(uid),
    )
    this.fileSource = opts.manifestsDir
      ? new FileSource(
          {dir: resolve(opts.manifestsDir), nodeName: opts.nodeName, checkIntervalMs: opts.fileCheckIntervalMs},
          {
            onSet: (pods) => this.setFile(pods),
            onProblem: (p) => this.manifestProblem(p),
            onError: (m) => this.emit('error', m),
          },
        )
      : undefined
    this.source = new PodSource(
      {core: opts.core, kc: opts.kc, nodeName: opts.nodeName, counter: opts.counter, watchTimeoutSeconds: opts.watchTimeoutSeconds},
      {
        onList: (pods) => this.list(pods),
        onUpsert: (pod) => this.upsert(pod),
        onDelete: (pod) => this.delete(pod),
        onError: (m) => this.emit('error', m),
      },
    )
    opts.provider.notifyPods((pod) => this.notified(pod))
  }

  /**
   * A full listing of the node's pods (from the API source). Mirror pods
   * are not pods to run: they stand for static pods and go to the mirror
   * manager.
   */
  list(pods: V1Pod[]): void {
    const mirrors = pods.filter(isMirrorPod)
    this.task(() => this.mirrors.set(mirrors))
    const own = pods.filter((p) => !isMirrorPod(p))
    if (!this.orphansChecked) {
      this.orphansChecked = true
      this.chain = this.chain.then(() => this.killOrphans(own))
    }
    this.enqueue(this.config.set(own))
    this.markSeen(ApiserverSource)
  }

  /**
   * Pods the provider runs (adopted after a restart) that the API no longer
   * has were deleted while vnode was down: kill them (the kubelet's
   * HandlePodCleanups kills such runtime pods with a 1 s grace) and forget
   * them, before the first list starts anything under the same names.
   */
  private async killOrphans(listed: V1Pod[]): Promise<void> {
    const known = new Set(listed.map((p) => p.metadata?.uid))
    let running: V1Pod[]
    try {
      running = await this.opts.provider.getPods()
    } catch {
      return
    }
    await Promise.all(
      running
        // Static pods come from files, not the API: their own source decides.
        .filter((p) => !known.has(p.metadata?.uid) && !isStaticPod(p))
        .map(async (pod) => {
          try {
            await this.opts.provider.deletePod(structuredClone(pod), OrphanGracePeriodSeconds)
            await this.opts.provider.cleanupPod?.(structuredClone(pod))
          } catch (error) {
            this.emit('error', `killing orphaned pod ${pod.metadata?.namespace}/${pod.metadata?.name}: ${(error as Error).message}`)
          }
        }),
    )
  }

  /** A pod was added or modified in the API (from the source). */
  upsert(pod: V1Pod): void {
    // The API source watches only after its first list: a watch event means it has been listed.
    this.markSeen(ApiserverSource)
    if (isMirrorPod(pod)) return this.task(() => this.mirrors.upsert(pod))
    this.enqueue(this.config.upsertOne(pod))
  }

  /** A pod is gone from the API (from the source). */
  delete(pod: V1Pod): void {
    this.markSeen(ApiserverSource)
    if (isMirrorPod(pod)) return this.task(() => this.mirrors.remove(pod))
    this.enqueue(this.config.remove(pod))
  }

  /** A complete listing of the manifest directory (from the file source; empty counts too). */
  setFile(pods: V1Pod[]): void {
    if (!this.fileConfig) return
    this.enqueue(this.fileConfig.set(pods))
    this.markSeen(FileSourceName)
  }

  /** Every configured source has had a complete listing go through: deletions may happen. */
  get sourcesReady(): boolean {
    return [...this.sources].every((s) => this.seen.has(s))
  }

  /** Resolves once every op so far is applied and no worker or mirror has work in hand. */
  async settled(): Promise<void> {
    await this.chain
    await this.workers.idle()
    await this.mirrors.idle()
    await this.chain
  }

  /** Start watching; resolves after the first listing of every source has been applied. */
  async start(): Promise<void> {
    let listed!: () => void
    const first = new Promise<void>((resolve) => (listed = resolve))
    this.running = this.source.run(this.abort.signal, listed)
    await Promise.all([Promise.race([first, this.running]), this.fileSource?.start()])
    await this.chain
  }

  private markSeen(source: string): void {
    if (this.seen.has(source)) return
    this.task(() => {
      if (this.seen.has(source)) return
      this.seen.add(source)
      if (this.sourcesReady) this.allSourcesSeen()
    })
  }

  /** Deletions held back until now go ahead; orphaned mirrors can be told from unread static pods. */
  private allSourcesSeen(): void {
    const held = [...this.deferredRemoves.values()].filter((p) => !this.configPod(p.metadata!.uid!))
    this.deferredRemoves.clear()
    if (held.length) this.removeAll(held)
    this.mirrors.reconcileAll(this.fileConfig?.values().map(podKeyOf) ?? [])
  }

  private configPod(uid: string): V1Pod | undefined {
    return this.config.get(uid) ?? this.fileConfig?.get(uid)
  }

  /** virtual-kubelet's environment events, once the provider has the pod (its objects are then watched). */
  private async virtualKubeletEvents(pod: V1Pod, objects: ObjectLookup): Promise<void> {
    const events = await virtualKubeletEnvEvents(pod, objects).catch((error: Error) => {
      this.emit('error', `virtual-kubelet events of ${pod.metadata?.namespace}/${pod.metadata?.name}: ${error.message}`)
      return []
    })
    for (const e of events) await this.opts.recorder.record(podRef(pod), e.type, e.reason, e.message)
  }

  /** A static pod manifest was skipped: a Warning on the Node naming the file, and an error line. */
  private manifestProblem(p: ManifestProblem): void {
    const message = `static pod manifest ${p.file} skipped: ${p.message}`
    void this.opts.recorder.record(this.nodeRef, 'Warning', FailedValidationReason, message)
    this.emit('error', message)
  }

  /** The Node that owns mirror pods: the watch's copy when it has one (no GET per mirror), else the API's. */
  private async readOwner(): Promise<MirrorOwner | undefined> {
    const ownerOf = (node: V1Node) => (node.metadata?.deletionTimestamp || !node.metadata?.uid ? undefined : {name: this.opts.nodeName, uid: node.metadata.uid})
    const watched = this.opts.watchedNode?.()
    if (watched) return ownerOf(watched)
    try {
      return ownerOf(await this.opts.core.readNode({name: this.opts.nodeName}))
    } catch {
      return undefined
    }
  }

  /** The mirror of this name changed: the static pods of that name write their status to the new one. */
  private mirrorChanged(name: string): void {
    for (const p of this.fileConfig?.values() ?? []) if (podKeyOf(p) === name) this.status.retarget(p.metadata!.uid!)
    for (const [uid, n] of this.removedStatic) if (n === name) this.status.retarget(uid)
  }

  /** A worker is gone for good. A removed static pod's status and mirror can go now. */
  private forgotten(uid: string): void {
    const name = this.removedStatic.get(uid)
    if (name === undefined) return
    this.removedStatic.delete(uid)
    this.status.remove(uid)
    this.mirrors.reconcile(name)
  }

  /** Every pod of this node with its status as last written (deep copies). */
  pods(): V1Pod[] {
    return this.status.pods()
  }

  /** One pod of this node with its status as last written: read-only, not a copy. */
  pod(namespace: string, name: string): V1Pod | undefined {
    return this.status.find(namespace, name)
  }

  private notified(pod: V1Pod): void {
    const uid = pod.metadata?.uid
    if (!uid || !pod.status || !this.status.has(uid)) return
    this.status.setReported(uid, pod.status)
    this.workers.reported(uid)
  }

  private enqueue(ops: PodOp[]): void {
    if (!ops.length) return
    this.task(() => this.apply(ops))
  }

  /** Runs after everything queued so far (config ops, mirror events, source marks keep their order). */
  private task(fn: () => unknown): void {
    this.chain = this.chain.then(fn).then(
      () => undefined,
      (error: unknown) => {
        this.emit('error', `pod config: ${(error as Error).message}`)
      },
    )
  }

  private async apply(ops: PodOp[]): Promise<void> {
    for (const {op, pods} of ops) {
      switch (op) {
        case 'ADD':
          await this.add(pods)
          break
        case 'UPDATE':
        case 'DELETE':
          // DELETE is an update: graceful deletion goes through the worker.
          for (const pod of pods) {
            this.status.track(pod)
            this.workers.update({type: 'update', pod})
            if (isStaticPod(pod)) this.mirrors.reconcile(podKeyOf(pod))
          }
          break
        case 'RECONCILE':
          for (const pod of pods) this.status.track(pod)
          break
        case 'REMOVE':
          if (!this.sourcesReady) {
            // deletePod: "skipping delete because sources aren't ready yet"; done once they are.
            for (const pod of pods) this.deferredRemoves.set(pod.metadata!.uid!, pod)
            break
          }
          this.removeAll(pods)
          break
      }
    }
    this.countChanged()
  }

  private removeAll(pods: V1Pod[]): void {
    for (const pod of pods) {
      const uid = pod.metadata!.uid!
      if (isStaticPod(pod) && this.workers.state(uid) !== undefined) {
        // Its status still goes to its mirror while it terminates; both go once the worker is done.
        this.removedStatic.set(uid, podKeyOf(pod))
      } else {
        this.status.remove(uid)
      }
      this.opts.recorder.forget(uid)
      this.workers.update({type: 'kill', pod, removed: true})
      this.emit('podRemoved', uid)
      if (isStaticPod(pod)) this.mirrors.reconcile(podKeyOf(pod))
    }
  }

  private async add(pods: V1Pod[]): Promise<void> {
    let node: AdmissionNode | undefined
    for (const pod of pods) {
      this.status.track(pod)
      const terminal = isTerminalPhase(pod.status?.phase) || !!pod.metadata?.deletionTimestamp
      let override: StatusOverride | undefined
      if (!terminal) {
        if (!this.accepting) {
          override = {phase: 'Failed', reason: NodeShutdownReason, message: NodeShutdownRejectMessage, noContainers: true}
        } else {
          node ??= await this.opts.node()
          const result = admitPod(pod, node, this.workers.active())
          if (!result.admit) override = {phase: 'Failed', reason: result.reason, message: RejectedMessagePrefix + result.message, noContainers: true}
        }
        if (override) void this.opts.recorder.record(podRef(pod), 'Warning', override.reason, override.message.replace(RejectedMessagePrefix, ''))
      }
      this.workers.update({type: 'create', pod, statusOverride: override})
      if (isStaticPod(pod)) this.mirrors.reconcile(podKeyOf(pod))
    }
  }

  private countChanged(): void {
    const n = this.config.size + (this.fileConfig?.size ?? 0)
    if (n === this.lastCount) return
    this.lastCount = n
    this.emit('count', n)
  }

  /**
   * Node shutdown: stop accepting pods, then terminate every pod within
   * min(its grace, graceSeconds); their final status is Failed/Terminated.
   */
  async shutdown(graceSeconds: number, signal?: AbortSignal): Promise<boolean> {
    this.accepting = false
    // No new static pods while shutting down; their mirrors stay and get the final status.
    await this.fileSource?.stop()
    await this.chain
    const done = await this.workers.terminateAll(graceSeconds, NodeShutdownOverride, graceSeconds * 1000 + 5_000, signal)
    await this.status.flushAll()
    return done
  }

  /** Stop the watch, timers and workers; close nothing of the provider's. */
  async stop(): Promise<void> {
    this.accepting = false
    this.abort.abort()
    await this.fileSource?.stop()
    await this.running?.catch(() => undefined)
    await this.chain
    await this.mirrors.stop()
    this.workers.stop()
    this.status.stop()
    this.deferredRemoves.clear()
    this.removedStatic.clear()
  }
}
