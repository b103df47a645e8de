import type {CoreV1Api, KubeConfig, V1Pod} from '@kubernetes/client-node'
import {EventEmitter} from 'node:events'
import type {RequestCounter} from '../kube/client.js'
import type {EventRecorder} from '../kube/events.js'
import type {PodLifecycleHandler} from '../provider/handler.js'
import {type AdmissionNode, admitPod, NodeShutdownReason, NodeShutdownRejectMessage, RejectedMessagePrefix} from './admission.js'
import {type PodOp, PodConfig} from './config.js'
import {podRef} from './pod-worker.js'
import {PodWorkers} from './pod-workers.js'
import {PodSource} from './source.js'
import {StatusManager} from './status-manager.js'
import {isTerminalPhase, type StatusOverride} from './status.js'

/** Node shutdown status (pkg/kubelet/nodeshutdown). */
export const NodeShutdownOverride: StatusOverride = {
  phase: 'Failed',
  reason: 'Terminated',
  message: 'Pod was terminated in response to imminent node shutdown.',
  keepSucceeded: true,
  conditions: [{type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: 'Pod was terminated in response to imminent node shutdown.'}],
}

/** Grace for pods the provider runs that the API no longer has (the kubelet's orphan kill). */
export const OrphanGracePeriodSeconds = 1

export interface PodControllerOptions {
  core: CoreV1Api
  kc: KubeConfig
  counter?: RequestCounter
  nodeName: string
  nodeIP: string
  provider: PodLifecycleHandler
  recorder: Pick<EventRecorder, 'record' | 'forget'>
  /** The node as admission sees it (fresh labels, taints, allocatable). */
  node: () => Promise<AdmissionNode>
  resyncIntervalMs?: number
  statusCoalesceMs?: number
  startHoldMs?: number
  watchTimeoutSeconds?: number
}

export interface PodControllerEvents {
  pod: [pod: V1Pod]
  podRemoved: [uid: string]
  count: [count: number]
  error: [message: string]
}

/**
 * Wires the pod data path: API source -> config ops -> admission -> pod
 * workers -> provider (deep copies) -> notifyPods -> status manager -> API.
 */
export class PodController extends EventEmitter<PodControllerEvents> {
  readonly config = new PodConfig()
  readonly status: StatusManager
  readonly workers: PodWorkers
  private readonly source: PodSource
  private readonly abort = new AbortController()
  private running: Promise<void> | undefined
  private chain: Promise<void> = Promise.resolve()
  private accepting = true
  private lastCount = 0
  private orphansChecked = false

  constructor(private readonly opts: PodControllerOptions) {
    super()
    this.status = new StatusManager(opts.core, {
      nodeIP: opts.nodeIP,
      coalesceMs: opts.statusCoalesceMs,
      startHoldMs: opts.startHoldMs,
      hooks: {
        couldHaveRunningContainers: (uid) => this.workers.couldHaveRunningContainers(uid),
        isStarting: (uid) => this.workers.isStarting(uid),
      },
      onChange: (pod) => this.emit('pod', pod),
      onError: (m) => this.emit('error', m),
    })
    this.workers = new PodWorkers({
      provider: opts.provider,
      status: this.status,
      event: (pod, type, reason, message) => void opts.recorder.record(podRef(pod), type, reason, message),
      resyncIntervalMs: opts.resyncIntervalMs,
    })
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

  /** A full listing of the node's pods (from the source). */
  list(pods: V1Pod[]): void {
    if (!this.orphansChecked) {
      this.orphansChecked = true
      this.chain = this.chain.then(() => this.killOrphans(pods))
    }
    this.enqueue(this.config.set(pods))
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
        .filter((p) => !known.has(p.metadata?.uid))
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
    this.enqueue(this.config.upsertOne(pod))
  }

  /** A pod is gone from the API (from the source). */
  delete(pod: V1Pod): void {
    this.enqueue(this.config.remove(pod))
  }

  /** Resolves once every op so far is applied and no worker has work in hand. */
  async settled(): Promise<void> {
    await this.chain
    await this.workers.idle()
  }

  /** Start watching; resolves after the first list has been applied. */
  async start(): Promise<void> {
    let listed!: () => void
    const first = new Promise<void>((resolve) => (listed = resolve))
    this.running = this.source.run(this.abort.signal, listed)
    await Promise.race([first, this.running])
    await this.chain
  }

  /** Every pod of this node with its status as last written (deep copies). */
  pods(): V1Pod[] {
    return this.status.pods()
  }

  private notified(pod: V1Pod): void {
    const uid = pod.metadata?.uid
    if (!uid || !pod.status || !this.status.has(uid)) return
    this.status.setReported(uid, pod.status)
    // Everything finished for good: let the worker move on to terminating.
    if (this.status.reportedTerminal(uid) && this.workers.state(uid) === 'sync') {
      const latest = this.config.get(uid)
      if (latest) this.workers.update({type: 'sync', pod: latest})
    }
  }

  private enqueue(ops: PodOp[]): void {
    if (!ops.length) return
    this.chain = this.chain.then(() => this.apply(ops)).catch((error: unknown) => {
      this.emit('error', `pod config: ${(error as Error).message}`)
    })
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
          }
          break
        case 'RECONCILE':
          for (const pod of pods) this.status.track(pod)
          break
        case 'REMOVE':
          for (const pod of pods) {
            const uid = pod.metadata!.uid!
            this.status.remove(uid)
            this.opts.recorder.forget(uid)
            this.workers.update({type: 'kill', pod, removed: true})
            this.emit('podRemoved', uid)
          }
          break
      }
    }
    this.countChanged()
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
    }
  }

  private countChanged(): void {
    const n = this.config.size
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
    await this.chain
    const done = await this.workers.terminateAll(graceSeconds, NodeShutdownOverride, graceSeconds * 1000 + 5_000, signal)
    await this.status.flushAll()
    return done
  }

  /** Stop the watch, timers and workers; close nothing of the provider's. */
  async stop(): Promise<void> {
    this.accepting = false
    this.abort.abort()
    await this.running?.catch(() => undefined)
    await this.chain
    this.workers.stop()
    this.status.stop()
  }
}
