import {type CoreV1Api, PatchStrategy, setHeaderOptions, type V1Node, type V1NodeCondition, type V1NodeStatus, type V1ObjectReference} from '@kubernetes/client-node'
import jsonpatch from 'fast-json-patch'
import {EventEmitter} from 'node:events'
import {Backoff, sleep} from '../kube/backoff.js'
import {describeApiError, isAlreadyExists, isNotFound, isUidMismatch} from '../kube/errors.js'
import type {EventRecorder} from '../kube/events.js'
import {type HostIdentity, type HostReading, hostIdentity, readHost} from './host.js'
import {
  buildStatus,
  comparable,
  type ConditionType,
  ConditionTexts,
  type ConditionValues,
  CordonedByAnnotation,
  lastAppliedStatus,
  type NodeSpecConfig,
  pressureFrom,
  threeWayStatusPatch,
} from './node-status.js'

/** How often host readings are taken and compared with the last status written. */
export const DefaultStatusCheckIntervalMs = 10_000
/** A status that did not change is still written this often (nodeStatusReportFrequency). */
export const DefaultStatusReportIntervalMs = 5 * 60_000
export const DefaultRegisterRetryInitialMs = 100
export const DefaultRegisterRetryMaxMs = 7_000
/** The Ready condition's message while the node stops (the kubelet's node shutdown manager says so). */
export const NodeShuttingDownMessage = 'node is shutting down'

export interface NodeControllerOptions {
  stateDir: string
  statusCheckIntervalMs?: number
  statusReportIntervalMs?: number
  /** Re-create the Node when it is deleted out of band. */
  reregister?: boolean
  readHost?: (stateDir: string) => HostReading
}

export interface NodeSnapshot {
  name: string
  uid?: string
  conditions: V1NodeCondition[]
  capacity: Record<string, string>
  allocatable: Record<string, string>
  /** The labels this node registers with (its sandbox mode among them). */
  labels: Record<string, string>
  /** The annotations vnode owns on it (the walls its pods get). */
  annotations?: Record<string, string>
  /** Where the API server reaches its kubelet API, as published: the node IP and kubelet port (a relay's, behind one). */
  kubeletEndpoint?: string
  lastStatusWrite?: Date
  error?: string
}

const SmpOptions = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch)
const MergeOptions = setHeaderOptions('Content-Type', PatchStrategy.MergePatch)

/**
 * Owns the Node object: registration (create or adopt), status (three-way
 * strategic merge, written only on change or every 5 minutes), and what it
 * looks like after vnode stops. Emits 'change' with a NodeSnapshot.
 */
export class NodeController extends EventEmitter {
  private node: V1Node | undefined
  /** The watch saw the Node deleted and it is not registered again yet. */
  private gone = false
  private lastReported: V1NodeStatus | undefined
  private lastReportAt = 0
  private conditions: V1NodeCondition[] | undefined
  /** The uid of the Node that `conditions` and `lastReported` were written to: they carry over to that Node only. */
  private reportedTo: string | undefined
  private wake: (() => void) | undefined
  private dirty = false
  private forceNext = false
  private registering: Promise<V1Node | undefined> | undefined
  private shuttingDown = false
  private syncing: Promise<unknown> = Promise.resolve()
  private readonly identity: HostIdentity
  private readonly checkIntervalMs: number
  private readonly reportIntervalMs: number
  private readonly read: (stateDir: string) => HostReading
  private lastError: string | undefined

  constructor(
    private readonly core: CoreV1Api,
    readonly config: NodeSpecConfig,
    private readonly recorder: EventRecorder,
    private readonly opts: NodeControllerOptions,
  ) {
    super()
    this.identity = hostIdentity()
    this.checkIntervalMs = opts.statusCheckIntervalMs ?? DefaultStatusCheckIntervalMs
    this.reportIntervalMs = opts.statusReportIntervalMs ?? DefaultStatusReportIntervalMs
    this.read = opts.readHost ?? readHost
  }

  get name(): string {
    return this.config.name
  }

  get uid(): string | undefined {
    return this.node?.metadata?.uid
  }

  /** Where the API server reaches the kubelet API from now on (a relay's pod IP and port); the next status write publishes it. */
  setEndpoint(endpoint: Pick<NodeSpecConfig, 'nodeIP' | 'port'>): void {
    Object.assign(this.config, endpoint)
  }

  /** The kubelet refers to its node in events with the node name as UID. */
  get ref(): V1ObjectReference {
    return {kind: 'Node', apiVersion: 'v1', name: this.name, uid: this.name}
  }

  snapshot(): NodeSnapshot {
    return {
      name: this.name,
      uid: this.uid,
      conditions: this.conditions ?? [],
      capacity: (this.lastReported?.capacity ?? {}) as Record<string, string>,
      allocatable: (this.lastReported?.allocatable ?? {}) as Record<string, string>,
      labels: {...this.config.labels},
      annotations: {...this.config.annotations},
      kubeletEndpoint: `${this.config.nodeIP.includes(':') ? `[${this.config.nodeIP}]` : this.config.nodeIP}:${this.config.port}`,
      lastStatusWrite: this.lastReportAt ? new Date(this.lastReportAt) : undefined,
      error: this.lastError,
    }
  }

  private initialNode(): V1Node {
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: this.name,
        labels: this.config.labels,
        annotations: {'volumes.kubernetes.io/controller-managed-attach-detach': 'true', ...this.config.annotations},
      },
      spec: {providerID: `vnode://${this.name}`, taints: this.config.taints},
    }
  }

  /** Brings an existing Node in line with our labels, taints and providerID, keeping what others added. */
  private async adopt(existing: V1Node): Promise<V1Node> {
    const taints = [...(existing.spec?.taints ?? [])]
    for (const t of this.config.taints) {
      if (!taints.some((x) => x.key === t.key && x.effect === t.effect)) taints.push(t)
    }
    const cordonedByUs = existing.metadata?.annotations?.[CordonedByAnnotation] === 'true'
    const patch: Record<string, unknown> = {
      metadata: {
        labels: this.config.labels,
        annotations: {...this.config.annotations, ...(cordonedByUs ? {[CordonedByAnnotation]: null} : {})},
      },
      spec: {
        taints,
        ...(existing.spec?.providerID ? {} : {providerID: `vnode://${this.name}`}),
        ...(cordonedByUs ? {unschedulable: false} : {}),
      },
    }
    return this.core.patchNode({name: this.name, body: patch}, MergeOptions)
  }

  /** Create the Node or adopt the existing one; retries with backoff until done or aborted. */
  async register(signal?: AbortSignal): Promise<V1Node> {
    const backoff = new Backoff(DefaultRegisterRetryInitialMs, DefaultRegisterRetryMaxMs)
    for (;;) {
      try {
        try {
          this.node = await this.core.createNode({body: this.initialNode()})
        } catch (error) {
          if (!isAlreadyExists(error)) throw error
          this.node = await this.adopt(await this.core.readNode({name: this.name}))
        }
        this.lastReported = lastAppliedStatus(this.node)
        this.lastReportAt = 0
        // Transitions carry over only from the Node now registered (an adopted one's own); a new Node has none.
        this.conditions = undefined
        this.lastError = undefined
        return this.node
      } catch (error) {
        this.lastError = `registering node: ${describeApiError(error)}`
        this.emit('change', this.snapshot())
        if (signal?.aborted) throw error
        await sleep(backoff.next(), signal)
      }
    }
  }

  /**
   * The node as the API server has it (from the node watch). When a condition
   * we own differs from what we wrote (the node lifecycle controller set it to
   * Unknown while we were paused, or someone overwrote it), write ours again.
   */
  observe(node: V1Node): void {
    const uidChanged = this.node !== undefined && node.metadata?.uid !== this.node.metadata?.uid
    this.node = node
    this.gone = false
    if (uidChanged) this.emit('registered', node)
    if (!this.conditions || this.shuttingDown) return
    const server = node.status?.conditions ?? []
    const drift = this.conditions.some((c) => {
      const s = server.find((x) => x.type === c.type)
      return !s || s.status !== c.status || s.reason !== c.reason || s.message !== c.message
    })
    if (drift) {
      this.forceNext = true
      this.notify()
    }
  }

  /**
   * The Node as the API server has it, from the watch (or registration):
   * what admission reads instead of a GET. Undefined while
   * the Node is deleted or being deleted.
   */
  watched(): V1Node | undefined {
    return this.gone || this.node?.metadata?.deletionTimestamp ? undefined : this.node
  }

  /** The watch saw the Node deleted: no copy until it is registered again. */
  observeDeleted(): void {
    this.gone = true
  }

  /** Non-blocking: ask the status loop to look again now. */
  notify(): void {
    this.dirty = true
    this.wake?.()
  }

  private values(reading: HostReading): ConditionValues {
    return {
      ...pressureFrom(reading),
      Ready: !this.shuttingDown,
      notReadyMessage: this.shuttingDown ? NodeShuttingDownMessage : undefined,
    }
  }

  private emitTransitions(before: V1NodeCondition[] | undefined, after: V1NodeCondition[]): void {
    for (const c of after) {
      const prev = before?.find((p) => p.type === c.type)
      if (prev?.status === c.status) continue
      const text = ConditionTexts[c.type as ConditionType][c.status as 'True' | 'False']
      void this.recorder.record(this.ref, 'Normal', text.event, `Node ${this.name} status is now: ${text.event}`)
    }
  }

  /**
   * Take a reading; write status when it changed (heartbeat times aside), when
   * the report interval has passed, or when forced.
   */
  syncStatus(force = false): Promise<boolean> {
    // One write at a time: a write of the loop still in flight must not land after markStopped's.
    const next = this.syncing.then(() => this.syncStatusNow(force))
    this.syncing = next.catch(() => undefined)
    return next
  }

  private async syncStatusNow(force: boolean, replacedOnce = false): Promise<boolean> {
    const reading = this.read(this.opts.stateDir)
    // What we wrote carries over only to the Node we wrote it to: a Node replaced under the same name (deleted and
    // re-created by us or anyone) starts from its own conditions, so no transition time of the old one lands on it.
    const target = this.node
    const uid = target?.metadata?.uid
    const ours = uid !== undefined && uid === this.reportedTo
    const lastReported = ours ? this.lastReported : lastAppliedStatus(target)
    const previous = (ours ? this.conditions : undefined) ?? target?.status?.conditions
    let desired = buildStatus(reading, this.identity, this.config, this.values(reading), previous, new Date())
    const changed = !lastReported || jsonpatch.compare(comparable(lastReported), comparable(desired)).length > 0
    if (this.forceNext) force = true
    this.forceNext = false
    if (!force && !changed && Date.now() - this.lastReportAt < this.reportIntervalMs) return false
    try {
      this.node = await this.core.patchNodeStatus({name: this.name, body: withUid(threeWayStatusPatch(lastReported, desired), uid)}, SmpOptions)
    } catch (error) {
      if (isUidMismatch(error) && !replacedOnce) {
        // Replaced since we read it: read the Node now there and write again from its own conditions.
        this.node = await this.core.readNode({name: this.name})
        return this.syncStatusNow(true, true)
      }
      if (!isNotFound(error) || this.opts.reregister === false || this.shuttingDown) throw error
      await this.register()
      this.emit('registered', this.node)
      desired = buildStatus(reading, this.identity, this.config, this.values(reading), this.node?.status?.conditions, new Date())
      this.node = await this.core.patchNodeStatus({name: this.name, body: withUid(threeWayStatusPatch(undefined, desired), this.uid)}, SmpOptions)
    }
    this.emitTransitions(this.lastReportAt ? this.conditions : undefined, desired.conditions ?? [])
    this.conditions = desired.conditions
    this.lastReported = desired
    this.reportedTo = this.uid
    this.lastReportAt = Date.now()
    this.lastError = undefined
    this.emit('change', this.snapshot())
    return true
  }

  /**
   * Called when the Node may be gone (watch DELETED, lease NotFound): re-create
   * it if allowed. Concurrent callers share one registration.
   */
  ensureRegistered(): Promise<V1Node | undefined> {
    this.registering ??= this.reregister().finally(() => (this.registering = undefined))
    return this.registering
  }

  private async reregister(): Promise<V1Node | undefined> {
    if (this.opts.reregister === false || this.shuttingDown) return undefined
    try {
      this.node = await this.core.readNode({name: this.name})
      this.gone = false
      return this.node
    } catch (error) {
      if (!isNotFound(error)) return undefined
    }
    await this.register()
    this.gone = false
    this.emit('registered', this.node)
    await this.syncStatus(true).catch(() => undefined)
    return this.node
  }

  /** The status loop, until signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(200, this.checkIntervalMs)
    while (!signal.aborted) {
      this.dirty = false
      let delay = this.checkIntervalMs
      try {
        await this.syncStatus()
        backoff.reset()
      } catch (error) {
        this.lastError = `node status: ${describeApiError(error)}`
        this.emit('change', this.snapshot())
        delay = backoff.next()
      }
      if (this.dirty) continue
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, delay)
        const onAbort = () => done()
        signal.addEventListener('abort', onAbort, {once: true})
        this.wake = done
        function done() {
          clearTimeout(t)
          signal.removeEventListener('abort', onAbort)
          resolve()
        }
      })
      this.wake = undefined
    }
  }

  /**
   * One annotation vnode owns on the Node (null removes it): kept in what a registration
   * writes, and patched onto the Node now when it is registered (on a
   * failure the next registration writes it).
   */
  async setAnnotation(key: string, value: string | null): Promise<void> {
    const annotations = {...this.config.annotations}
    if (value === null) delete annotations[key]
    else annotations[key] = value
    this.config.annotations = annotations
    if (!this.node) return
    await this.core.patchNode({name: this.name, body: {metadata: {annotations: {[key]: value}}}}, MergeOptions)
  }

  /** Ready=False ("node is shutting down"), then cordon (remembering that we did). */
  async markStopped(): Promise<void> {
    this.shuttingDown = true
    await this.syncStatus(true)
    if (this.node?.spec?.unschedulable) return
    await this.core.patchNode({name: this.name, body: {metadata: {annotations: {[CordonedByAnnotation]: 'true'}}, spec: {unschedulable: true}}}, MergeOptions)
  }

  async deleteNode(): Promise<void> {
    this.shuttingDown = true
    try {
      await this.core.deleteNode({name: this.name})
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
  }
}

/** A status patch that lands only on the Node of this uid (metadata.uid as its precondition). */
function withUid(patch: Record<string, unknown>, uid: string | undefined): Record<string, unknown> {
  if (!uid) return patch
  const metadata = (patch.metadata ?? {}) as Record<string, unknown>
  return {...patch, metadata: {...metadata, uid}}
}
