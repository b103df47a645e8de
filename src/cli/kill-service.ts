import {allContainerStatuses} from '../common/pods.js'
import type {V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {isNotFound} from '../emulator/kube/errors.js'
import {EventReason} from '../emulator/kube/event-reasons.js'
import {DefaultTerminationGracePeriodSeconds} from '../emulator/provider/pod-defaults.js'
import {podStatus} from '../kubectl/pod-status.js'
import type {KubeSession} from './session.js'
import type {KillProgress, KillTarget} from '../kubectl/kill-report.js'

/** Without --timeout, a pod's wait lasts its grace period plus this margin for the node to report and remove it. */
export const DefaultKillTimeoutMarginMs = 30_000

/** The events a kill reports as they come: the node stopping the pod's containers, or failing to. */
const KillEventReasons = new Set<string>([EventReason.KillingContainer, 'Stopping', EventReason.ExceededGracePeriod, EventReason.FailedKillPod])

export interface KillOptions {
  /** undefined: the pod's own terminationGracePeriodSeconds. */
  gracePeriodSeconds?: number
  wait: boolean
  /** Overall deadline for the wait; undefined: per pod, grace period + margin. */
  timeoutMs?: number
  signal?: AbortSignal
}

export interface KillResult {
  /** Pods not found, failed to delete, or not removed in time. */
  failures: number
}

/** Pods matching a label selector in a namespace, as targets. */
export async function resolveSelector(session: KubeSession, namespace: string, labelSelector: string): Promise<KillTarget[]> {
  const list = await session.core.listNamespacedPod({namespace, labelSelector})
  return list.items.map((p) => ({namespace, name: p.metadata!.name!}))
}

/**
 * Deletes each pod through the API (the node does the terminating, as with
 * kubectl delete) and, with wait, follows each one until its object is gone:
 * status changes, container exits and the node's Killing events as they happen.
 * Pods proceed independently: one not found does not stop the others.
 */
export async function killPods(session: KubeSession, targets: KillTarget[], opts: KillOptions, onProgress: (p: KillProgress) => void): Promise<KillResult> {
  const started = Date.now()
  const deadline = opts.timeoutMs !== undefined ? started + opts.timeoutMs : undefined
  const results = await Promise.all(targets.map((t) => killOne(session, t, opts, deadline, started, onProgress)))
  return {failures: results.filter((ok) => !ok).length}
}

async function killOne(session: KubeSession, target: KillTarget, opts: KillOptions, deadline: number | undefined, started: number, onProgress: (p: KillProgress) => void): Promise<boolean> {
  let pod: V1Pod
  try {
    pod = await session.core.deleteNamespacedPod({name: target.name, namespace: target.namespace, gracePeriodSeconds: opts.gracePeriodSeconds})
  } catch (error) {
    if (isNotFound(error)) onProgress({kind: 'not-found', target})
    else onProgress({kind: 'failed', target, error})
    return false
  }
  const uid = pod.metadata?.uid ?? ''
  const grace = opts.gracePeriodSeconds ?? pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? DefaultTerminationGracePeriodSeconds
  // A pod the server removes at once (grace 0, or never bound to a node) comes back without a deletionTimestamp.
  const removedAtOnce = !pod.metadata?.deletionTimestamp || (await isGone(session, target, uid))
  onProgress({kind: 'requested', target, uid, gracePeriodSeconds: grace, removed: removedAtOnce, elapsedMs: Date.now() - started})
  if (removedAtOnce) {
    if (opts.wait) onProgress({kind: 'removed', target, elapsedMs: Date.now() - started})
    return true
  }
  if (!opts.wait) return true
  const until = deadline ?? Date.now() + grace * 1000 + DefaultKillTimeoutMarginMs
  return follow(session, target, pod, until, started, opts.signal, onProgress)
}

async function isGone(session: KubeSession, target: KillTarget, uid: string): Promise<boolean> {
  try {
    const p = await session.core.readNamespacedPod({name: target.name, namespace: target.namespace})
    return p.metadata?.uid !== uid
  } catch (error) {
    if (isNotFound(error)) return true
    throw error
  }
}

/** Container exits not yet reported, by comparing the last seen statuses with the new ones. */
export function newExits(before: V1Pod | undefined, after: V1Pod): {container: string; exitCode?: number; signal?: number; reason?: string}[] {
  const prev = new Map<string, V1ContainerStatus>()
  for (const c of allContainerStatuses(before)) prev.set(c.name, c)
  const out: {container: string; exitCode?: number; signal?: number; reason?: string}[] = []
  for (const c of allContainerStatuses(after)) {
    const t = c.state?.terminated
    if (!t) continue
    const p = prev.get(c.name)?.state?.terminated
    if (p && String(p.finishedAt) === String(t.finishedAt) && p.exitCode === t.exitCode) continue
    out.push({container: c.name, exitCode: t.exitCode, signal: t.signal, reason: t.reason})
  }
  return out
}

function follow(session: KubeSession, target: KillTarget, initial: V1Pod, until: number, started: number, signal: AbortSignal | undefined, onProgress: (p: KillProgress) => void): Promise<boolean> {
  const uid = initial.metadata!.uid!
  const watch = new session.lib.Watch(session.kc)
  const ns = encodeURIComponent(target.namespace)
  let last = initial
  let lastStatus = podStatus(initial)
  onProgress({kind: 'status', target, status: lastStatus, elapsedMs: Date.now() - started})
  const aborts: AbortController[] = []
  const timers: NodeJS.Timeout[] = []
  const seenEvents = new Set<string>()

  return new Promise<boolean>((resolve) => {
    let settled = false
    const finish = (ok: boolean) => {
      if (settled) return
      settled = true
      for (const t of timers) clearTimeout(t)
      for (const a of aborts) a.abort()
      signal?.removeEventListener('abort', onAbort)
      resolve(ok)
    }
    const onAbort = () => finish(false)
    signal?.addEventListener('abort', onAbort)
    const removed = () => {
      onProgress({kind: 'removed', target, elapsedMs: Date.now() - started})
      finish(true)
    }
    const onPod = (p: V1Pod) => {
      if (p.metadata?.uid !== uid) return removed()
      for (const x of newExits(last, p)) onProgress({kind: 'container', target, ...x, elapsedMs: Date.now() - started})
      const s = podStatus(p)
      if (s !== lastStatus) onProgress({kind: 'status', target, status: s, elapsedMs: Date.now() - started})
      last = p
      lastStatus = s
    }
    timers.push(
      setTimeout(
        () => {
          onProgress({kind: 'timeout', target, elapsedMs: Date.now() - started})
          finish(false)
        },
        Math.max(0, until - Date.now()),
      ),
    )

    const watchPod = async (rv: string | undefined): Promise<void> => {
      if (settled) return
      try {
        const query: Record<string, string> = {fieldSelector: `metadata.name=${target.name}`}
        if (rv) query.resourceVersion = rv
        let latestRv = rv
        const ctl = await watch.watch(
          `/api/v1/namespaces/${ns}/pods`,
          query,
          (type: string, obj: V1Pod) => {
            if (type === 'ERROR') {
              latestRv = undefined
              return
            }
            latestRv = obj.metadata?.resourceVersion ?? latestRv
            if (type === 'DELETED' && obj.metadata?.uid === uid) return removed()
            if (type === 'ADDED' || type === 'MODIFIED') onPod(obj)
          },
          () => {
            // The server closed the watch: look once (it may be gone already) and watch again.
            if (settled) return
            void recheck().then((rv2) => (rv2 === null ? undefined : watchPod(rv2 ?? latestRv)))
          },
        )
        aborts.push(ctl)
        if (settled) ctl.abort()
      } catch {
        if (!settled) timers.push(setTimeout(() => void recheck().then((rv2) => (rv2 === null ? undefined : watchPod(rv2))), 1000))
      }
    }
    /** null when the pod is gone (and reported); otherwise its resourceVersion. */
    const recheck = async (): Promise<string | null | undefined> => {
      try {
        const p = await session.core.readNamespacedPod({name: target.name, namespace: target.namespace})
        onPod(p)
        return settled ? null : p.metadata?.resourceVersion
      } catch (error) {
        if (isNotFound(error)) {
          removed()
          return null
        }
        return undefined
      }
    }
    const watchEvents = async (): Promise<void> => {
      // The node's Killing / exit events say when processes were signalled.
      try {
        const ctl = await watch.watch(
          `/api/v1/namespaces/${ns}/events`,
          {fieldSelector: `involvedObject.uid=${uid}`},
          (type: string, e: {reason?: string; message?: string; metadata?: {uid?: string}; count?: number; lastTimestamp?: unknown}) => {
            if (type !== 'ADDED' && type !== 'MODIFIED') return
            const key = `${e.metadata?.uid}/${e.count}`
            if (seenEvents.has(key)) return
            seenEvents.add(key)
            const t = e.lastTimestamp ? new Date(e.lastTimestamp as string).getTime() : Date.now()
            // Only what happened after the kill was asked for.
            if (t + 1000 < started) return
            if (e.reason && KillEventReasons.has(e.reason)) {
              onProgress({kind: 'event', target, reason: e.reason, message: e.message ?? '', elapsedMs: Date.now() - started})
            }
          },
          () => undefined,
        )
        aborts.push(ctl)
        if (settled) ctl.abort()
      } catch {
        /* events are a nicety; the pod watch decides */
      }
    }
    void watchPod(initial.metadata?.resourceVersion)
    void watchEvents()
  })
}
