import {SerialRunner} from '../../common/serial-runner.js'
import {podKeyOf} from '../../common/pods.js'
import type {CoreV1Api, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {Backoff} from '../kube/backoff.js'
import {describeApiError, isAlreadyExists, isConflict, isNotFound} from '../kube/errors.js'
import {ConfigHashAnnotation, ConfigMirrorAnnotation} from './config.js'

/** Retry after a failed mirror create or delete; at most about once a minute, as the kubelet's static pod resync. */
export const DefaultMirrorRetryInitialMs = 500
export const DefaultMirrorRetryMaxMs = 60_000
/** Mirror UIDs we deleted, remembered so a late watch event cannot bring them back into the cache. */
export const MirrorTombstones = 256

/** The Node a mirror pod is owned by. */
export interface MirrorOwner {
  name: string
  uid: string
}

/** Where the status of a static pod is written: its mirror pod. */
export interface MirrorTarget {
  name: string
  namespace: string
  uid: string
  status?: V1PodStatus
}

const hashOf = (pod: V1Pod) => pod.metadata?.annotations?.[ConfigHashAnnotation] ?? pod.metadata?.uid

/** IsMirrorPodOf: same name and namespace, and the mirror carries the static pod's hash. */
export function isMirrorPodOf(mirror: V1Pod, pod: V1Pod): boolean {
  return mirror.metadata?.name === pod.metadata?.name && mirror.metadata?.namespace === pod.metadata?.namespace && mirror.metadata?.annotations?.[ConfigMirrorAnnotation] === hashOf(pod)
}

/**
 * CreateMirrorPod's object: the static pod with its annotations plus
 * kubernetes.io/config.mirror = its hash, owned by the Node. The API server
 * gives it its own UID and initial status.
 */
export function mirrorPodFor(pod: V1Pod, owner: MirrorOwner): V1Pod {
  const m = pod.metadata ?? {}
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: m.name,
      namespace: m.namespace,
      labels: m.labels ? {...m.labels} : undefined,
      annotations: {...m.annotations, [ConfigMirrorAnnotation]: hashOf(pod)!},
      ownerReferences: [{apiVersion: 'v1', kind: 'Node', name: owner.name, uid: owner.uid, controller: true}],
    },
    spec: structuredClone(pod.spec),
  }
}

export interface MirrorManagerOptions {
  core: CoreV1Api
  /** The Node to own mirrors; undefined while it cannot be read or is being deleted (no mirror is made then). */
  owner: () => Promise<MirrorOwner | undefined>
  /** The static pod the config holds under this namespace/name, if any. */
  staticPod: (key: string) => V1Pod | undefined
  /** A removed static pod of this name is still terminating: its mirror stays until it is done. */
  terminating: (key: string) => boolean
  /** Every source has been seen: only then may a mirror without a static pod be deleted. */
  sourcesReady: () => boolean
  /** The mirror of this name changed (appeared, replaced, gone): its static pod's status has a new target. */
  onMirrorChanged?: (key: string) => void
  onError?: (message: string) => void
  retryInitialMs?: number
  retryMaxMs?: number
}

interface Slot {
  /** One reconciliation at a time; a trigger during one runs it once more after it. */
  runner: SerialRunner
  /** The last pass failed: a retry is due once the run is over. */
  failed: boolean
  timer?: NodeJS.Timeout
  backoff: Backoff
  /** The last failure reported for this name: a retry failing the same way is not reported again. */
  lastError?: string
}

/**
 * Keeps one mirror pod in the API for each static pod (kubelet
 * tryReconcileMirrorPods and the orphan cleanup of housekeeping). Mirrors
 * are learnt from the API source; each namespace/name is reconciled on its
 * own, one pass at a time, whenever its static pod or its mirror changes.
 */
export class MirrorManager {
  /** Mirror pods in the API by namespace/name, then UID (a replacement can briefly overlap the old one). */
  private readonly mirrors = new Map<string, Map<string, V1Pod>>()
  private readonly tombstones = new Set<string>()
  private readonly slots = new Map<string, Slot>()
  private stopped = false
  /** Mirror pods created and deleted (tests, request budget). */
  created = 0
  deleted = 0

  constructor(private readonly opts: MirrorManagerOptions) {}

  /** Mirror pods known (from the API). */
  get size(): number {
    let n = 0
    for (const m of this.mirrors.values()) n += m.size
    return n
  }

  /** Reconciliations in progress or waiting for a retry (leak checks). */
  get pending(): number {
    return this.slots.size
  }

  /** The namespace/names of every mirror known. */
  names(): string[] {
    return [...this.mirrors.keys()]
  }

  /** A full listing of the mirror pods of this node. */
  set(pods: V1Pod[]): void {
    const before = new Set(this.mirrors.keys())
    this.mirrors.clear()
    this.tombstones.clear()
    for (const p of pods) this.put(p)
    for (const name of new Set([...before, ...this.mirrors.keys()])) this.changed(name)
  }

  /** A mirror pod was added or modified in the API. */
  upsert(pod: V1Pod): void {
    const uid = pod.metadata?.uid
    if (!uid || this.tombstones.has(uid)) return
    this.put(pod)
    this.changed(podKeyOf(pod))
  }

  /** A mirror pod is gone from the API. */
  remove(pod: V1Pod): void {
    const uid = pod.metadata?.uid
    if (!uid) return
    this.tombstones.delete(uid)
    if (this.drop(podKeyOf(pod), uid)) this.changed(podKeyOf(pod))
  }

  /** The mirror a static pod's status goes to: the one carrying its hash. */
  target(pod: V1Pod): MirrorTarget | undefined {
    for (const m of this.mirrors.get(podKeyOf(pod))?.values() ?? []) {
      if (isMirrorPodOf(m, pod)) return {name: m.metadata!.name!, namespace: m.metadata!.namespace!, uid: m.metadata!.uid!, status: m.status}
    }
    return undefined
  }

  private put(pod: V1Pod): void {
    const name = podKeyOf(pod)
    let byUid = this.mirrors.get(name)
    if (!byUid) this.mirrors.set(name, (byUid = new Map()))
    byUid.set(pod.metadata!.uid!, pod)
  }

  private drop(name: string, uid: string): boolean {
    const byUid = this.mirrors.get(name)
    if (!byUid?.delete(uid)) return false
    if (byUid.size === 0) this.mirrors.delete(name)
    return true
  }

  private changed(name: string): void {
    this.opts.onMirrorChanged?.(name)
    this.reconcile(name)
  }

  /** Bring the mirror of this namespace/name in line with its static pod (soon, once at a time). */
  reconcile(name: string): void {
    if (this.stopped) return
    let slot = this.slots.get(name)
    if (!slot) {
      const s: Slot = {
        failed: false,
        backoff: new Backoff(this.opts.retryInitialMs ?? DefaultMirrorRetryInitialMs, this.opts.retryMaxMs ?? DefaultMirrorRetryMaxMs),
        runner: new SerialRunner(
          async () => {
            s.failed = !(await this.reconcileOnce(name, s).catch(() => false))
          },
          {active: () => !this.stopped, idle: () => this.settled(name, s)},
        ),
      }
      slot = s
      this.slots.set(name, slot)
    }
    if (!slot.runner.running) {
      // A trigger beats a waiting retry.
      clearTimeout(slot.timer)
      slot.timer = undefined
    }
    void slot.runner.run()
  }

  /** A run is over: retry after a failure (backing off), else forget the name. */
  private settled(name: string, s: Slot): void {
    if (this.stopped) return
    if (s.failed) {
      s.timer = setTimeout(() => {
        s.timer = undefined
        this.reconcile(name)
      }, s.backoff.next())
      s.timer.unref()
    } else {
      this.slots.delete(name)
    }
  }

  /** Reconcile every name with a mirror or a static pod (sources just became ready). */
  reconcileAll(staticNames: string[]): void {
    for (const name of new Set([...this.mirrors.keys(), ...staticNames])) this.reconcile(name)
  }

  /** One pass; false when something failed and a retry is due. */
  private async reconcileOnce(name: string, slot: Slot): Promise<boolean> {
    const pod = this.opts.staticPod(name)
    const mirrors = [...(this.mirrors.get(name)?.values() ?? [])]
    // While an older static pod of this name terminates, its mirror carries its status: leave it.
    if (this.opts.terminating(name)) return true
    let ok = true
    let current = false
    for (const m of mirrors) {
      if (pod && !current && !m.metadata?.deletionTimestamp && isMirrorPodOf(m, pod)) {
        current = true
        continue
      }
      // Orphans wait until every source has been seen: the static pod may just not be read yet.
      if (!pod && !this.opts.sourcesReady()) return true
      ok = (await this.deleteMirror(m, slot)) && ok
    }
    if (!pod || current || this.stopped) return ok
    const owner = await this.opts.owner()
    if (!owner) return false
    return (await this.createMirror(pod, owner, slot)) && ok
  }

  private report(slot: Slot, message: string): void {
    if (slot.lastError === message) return
    slot.lastError = message
    this.opts.onError?.(message)
  }

  /** DeleteMirrorPod: grace 0 with the UID precondition; gone or replaced already is fine. */
  private async deleteMirror(m: V1Pod, slot: Slot): Promise<boolean> {
    const {name, namespace, uid} = m.metadata!
    try {
      await this.opts.core.deleteNamespacedPod({name: name!, namespace: namespace!, gracePeriodSeconds: 0, body: {gracePeriodSeconds: 0, preconditions: {uid}}})
      this.deleted++
    } catch (error) {
      if (!isNotFound(error) && !isConflict(error)) {
        this.report(slot, `deleting mirror pod ${namespace}/${name}: ${describeApiError(error)}`)
        return false
      }
    }
    this.tombstone(uid!)
    if (this.drop(podKeyOf(m), uid!)) this.opts.onMirrorChanged?.(podKeyOf(m))
    return true
  }

  private async createMirror(pod: V1Pod, owner: MirrorOwner, slot: Slot): Promise<boolean> {
    const {name, namespace} = pod.metadata!
    try {
      const created = await this.opts.core.createNamespacedPod({namespace: namespace!, body: mirrorPodFor(pod, owner)})
      this.created++
      if (created.metadata?.uid && !this.stopped) {
        this.put(created)
        this.opts.onMirrorChanged?.(podKeyOf(pod))
      }
      return true
    } catch (error) {
      // It exists already: the watch tells us what it is, and we look again then.
      if (isAlreadyExists(error)) return true
      this.report(slot, `creating mirror pod ${namespace}/${name}: ${describeApiError(error)}`)
      return false
    }
  }

  private tombstone(uid: string): void {
    this.tombstones.add(uid)
    while (this.tombstones.size > MirrorTombstones) this.tombstones.delete(this.tombstones.values().next().value as string)
  }

  /** Resolves once no reconciliation is running (retries may still wait). */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.slots.values()].map((s) => s.runner.running).filter((p): p is Promise<void> => !!p)
      if (!running.length) return
      await Promise.all(running)
    }
  }

  /** Stop: no more API calls; the mirrors stay (they show the final status, and go with the Node). */
  async stop(): Promise<void> {
    this.stopped = true
    for (const s of this.slots.values()) clearTimeout(s.timer)
    await this.idle()
    this.slots.clear()
    this.mirrors.clear()
    this.tombstones.clear()
  }
}
