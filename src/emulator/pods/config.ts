import type {V1Pod} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'

/**
 * The pod config merge (kubelet pkg/kubelet/config): turns what the API
 * source sees into incremental operations, so only the pods that changed
 * reach their workers. The kubelet's update rule decides what an update is.
 */

export type PodOpKind = 'ADD' | 'UPDATE' | 'DELETE' | 'REMOVE' | 'RECONCILE'

export interface PodOp {
  op: PodOpKind
  pods: V1Pod[]
}

export const ConfigSourceAnnotation = 'kubernetes.io/config.source'
export const ConfigSeenAnnotation = 'kubernetes.io/config.seen'
export const ConfigMirrorAnnotation = 'kubernetes.io/config.mirror'
export const ConfigHashAnnotation = 'kubernetes.io/config.hash'
export const ApiserverSource = 'api'
export const FileSource = 'file'

/** IsStaticPod: the pod came from a source other than the API server. */
export function isStaticPod(pod: V1Pod): boolean {
  const source = pod.metadata?.annotations?.[ConfigSourceAnnotation]
  return source !== undefined && source !== ApiserverSource
}

/** IsMirrorPod: the API object that stands for a static pod. */
export function isMirrorPod(pod: V1Pod): boolean {
  return pod.metadata?.annotations?.[ConfigMirrorAnnotation] !== undefined
}

/** Local annotations the kubelet adds and ignores when comparing (isAnnotationMapEqual). */
const LocalAnnotations = new Set([ConfigSourceAnnotation, ConfigSeenAnnotation, ConfigMirrorAnnotation])

function foreignAnnotations(pod: V1Pod): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(pod.metadata?.annotations ?? {})) if (!LocalAnnotations.has(k)) out[k] = v
  return out
}

const time = (t: Date | string | undefined) => (t === undefined || t === null ? undefined : new Date(t).getTime())

/** podsDifferSemantically: spec, labels, deletionTimestamp, deletionGracePeriodSeconds, annotations other than config.*. */
export function podsDifferSemantically(a: V1Pod, b: V1Pod): boolean {
  return (
    !isDeepStrictEqual(a.spec, b.spec) ||
    !isDeepStrictEqual(a.metadata?.labels ?? {}, b.metadata?.labels ?? {}) ||
    time(a.metadata?.deletionTimestamp) !== time(b.metadata?.deletionTimestamp) ||
    (a.metadata?.deletionGracePeriodSeconds ?? undefined) !== (b.metadata?.deletionGracePeriodSeconds ?? undefined) ||
    !isDeepStrictEqual(foreignAnnotations(a), foreignAnnotations(b))
  )
}

/**
 * The pods of one source (the API, or the manifest files) by UID. Every method returns the ops to
 * apply, in the kubelet's emission order: REMOVE, ADD, UPDATE, DELETE, RECONCILE.
 * Pods handed out are copies carrying the local config annotations.
 */
export class PodConfig {
  private readonly pods = new Map<string, V1Pod>()

  constructor(
    private readonly now: () => Date = () => new Date(),
    /** The source name written into kubernetes.io/config.source. */
    readonly source: string = ApiserverSource,
  ) {}

  /** The pods held, as handed out (with the local annotations). */
  values(): V1Pod[] {
    return [...this.pods.values()]
  }

  get size(): number {
    return this.pods.size
  }

  get(uid: string): V1Pod | undefined {
    return this.pods.get(uid)
  }

  /** A full listing (after a list or relist): anything not in it is gone. */
  set(pods: V1Pod[]): PodOp[] {
    const present = new Set(pods.map((p) => p.metadata?.uid).filter((u): u is string => !!u))
    const removed = [...this.pods.entries()].filter(([uid]) => !present.has(uid)).map(([, p]) => p)
    for (const p of removed) this.pods.delete(p.metadata!.uid!)
    return order([{op: 'REMOVE', pods: removed}, ...pods.flatMap((p) => this.upsert(p))])
  }

  /** A watch ADDED or MODIFIED event. */
  upsertOne(pod: V1Pod): PodOp[] {
    return order(this.upsert(pod))
  }

  /** A watch DELETED event: the pod is gone from the API. */
  remove(pod: V1Pod): PodOp[] {
    const uid = pod.metadata?.uid
    if (!uid) return []
    const known = this.pods.get(uid)
    if (!known) return []
    this.pods.delete(uid)
    // The final state carries the deletion grace a force delete used.
    return [{op: 'REMOVE', pods: [this.local(pod, known)]}]
  }

  private local(pod: V1Pod, known?: V1Pod): V1Pod {
    const copy = structuredClone(pod)
    copy.metadata ??= {}
    copy.metadata.annotations = {
      ...copy.metadata.annotations,
      [ConfigSourceAnnotation]: this.source,
      [ConfigSeenAnnotation]: known?.metadata?.annotations?.[ConfigSeenAnnotation] ?? this.now().toISOString(),
    }
    return copy
  }

  private upsert(pod: V1Pod): PodOp[] {
    const uid = pod.metadata?.uid
    if (!uid) return []
    const known = this.pods.get(uid)
    const next = this.local(pod, known)
    this.pods.set(uid, next)
    if (!known) return [{op: 'ADD', pods: [next]}]
    if (podsDifferSemantically(known, next)) return [{op: next.metadata?.deletionTimestamp ? 'DELETE' : 'UPDATE', pods: [next]}]
    if (!isDeepStrictEqual(known.status, next.status)) return [{op: 'RECONCILE', pods: [next]}]
    return []
  }
}

const Order: PodOpKind[] = ['REMOVE', 'ADD', 'UPDATE', 'DELETE', 'RECONCILE']

function order(ops: PodOp[]): PodOp[] {
  const out: PodOp[] = []
  for (const kind of Order) {
    const pods = ops.filter((o) => o.op === kind).flatMap((o) => o.pods)
    if (pods.length) out.push({op: kind, pods})
  }
  return out
}
