import type {V1Pod} from '@kubernetes/client-node'
import {NodeMarkerLabel, PodPidsAnnotation} from '../emulator/node/node-status.js'
import type {KubeSession} from './session.js'

export interface PodQuery {
  /** undefined: all namespaces (-A). */
  namespace?: string
  labelSelector?: string
  /** One node by name; otherwise every node labelled as a vnode node. */
  node?: string
}

/** The nodes whose pods `kubectl vnode pods` shows. */
export async function vnodeNodeNames(session: KubeSession, node?: string): Promise<string[]> {
  if (node) {
    // Reading it names a missing node plainly (NotFound) instead of listing nothing.
    await session.core.readNode({name: node})
    return [node]
  }
  const nodes = await session.core.listNode({labelSelector: `${NodeMarkerLabel}=true`})
  return nodes.items.map((n) => n.metadata!.name!).sort()
}

export function sortPods(pods: V1Pod[]): V1Pod[] {
  return pods.sort(
    (a, b) => (a.metadata?.namespace ?? '').localeCompare(b.metadata?.namespace ?? '') || (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''),
  )
}

export interface PodList {
  pods: V1Pod[]
  nodes: string[]
  /** The newest resourceVersion seen, to start a watch from. */
  resourceVersion?: string
}

/** One list per node with a spec.nodeName field selector, so the server filters and big clusters stay cheap. */
export async function listVnodePods(session: KubeSession, q: PodQuery): Promise<PodList> {
  const nodes = await vnodeNodeNames(session, q.node)
  const lists = await Promise.all(
    nodes.map((n) => {
      const fieldSelector = `spec.nodeName=${n}`
      return q.namespace === undefined
        ? session.core.listPodForAllNamespaces({fieldSelector, labelSelector: q.labelSelector})
        : session.core.listNamespacedPod({namespace: q.namespace, fieldSelector, labelSelector: q.labelSelector})
    }),
  )
  const pods = sortPods(lists.flatMap((l) => l.items))
  const rvs = lists.map((l) => l.metadata?.resourceVersion).filter((v): v is string => !!v)
  return {pods, nodes, resourceVersion: rvs.sort((a, b) => Number(b) - Number(a))[0]}
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED'

export interface PodWatchHandle {
  stop(): void
  /** Settles when the watch ends for good (stop(), or an error it cannot recover from). */
  done: Promise<void>
}

/** How long to wait before re-opening a watch the server closed. */
export const DefaultRewatchDelayMs = 500

/**
 * Watches the pods of the given vnode nodes from a resourceVersion, re-opening
 * the watch when the server closes it and re-listing when the version expired (410).
 * One node uses a field selector; several filter on the client.
 */
export function watchVnodePods(
  session: KubeSession,
  q: PodQuery,
  nodes: string[],
  fromVersion: string | undefined,
  onEvent: (type: WatchEventType, pod: V1Pod) => void,
  onError: (error: unknown) => void = () => undefined,
): PodWatchHandle {
  const watch = new session.lib.Watch(session.kc)
  const path = q.namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(q.namespace)}/pods`
  const nodeSet = new Set(nodes)
  let rv = fromVersion
  let stopped = false
  let current: AbortController | undefined
  let timer: NodeJS.Timeout | undefined
  let finish!: () => void
  const done = new Promise<void>((resolve) => (finish = resolve))

  const open = async (): Promise<void> => {
    if (stopped) return
    const query: Record<string, string | boolean> = {allowWatchBookmarks: true}
    if (rv) query.resourceVersion = rv
    if (q.labelSelector) query.labelSelector = q.labelSelector
    if (nodes.length === 1) query.fieldSelector = `spec.nodeName=${nodes[0]}`
    try {
      current = await watch.watch(
        path,
        query,
        (type: string, obj: V1Pod & {metadata?: {resourceVersion?: string}}) => {
          if (obj?.metadata?.resourceVersion) rv = obj.metadata.resourceVersion
          if (type === 'BOOKMARK' || type === 'ERROR') {
            if (type === 'ERROR' && (obj as {code?: number}).code === 410) rv = undefined
            return
          }
          if (!nodeSet.has(obj.spec?.nodeName ?? '')) return
          onEvent(type as WatchEventType, obj)
        },
        (err: unknown) => {
          if (stopped) return
          if (err && (err as {name?: string}).name !== 'AbortError') onError(err)
          timer = setTimeout(() => void open(), DefaultRewatchDelayMs)
        },
      )
    } catch (error) {
      if (stopped) return
      onError(error)
      timer = setTimeout(() => void open(), DefaultRewatchDelayMs * 4)
    }
  }
  void open()
  return {
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      current?.abort()
      finish()
    },
    done,
  }
}

/**
 * Adds each running pod's process ids (from its node's kubelet API,
 * /runningpods/, through the API server's node proxy) as an annotation on the
 * listed objects, for `-o wide`. A node that cannot be reached leaves <none>.
 */
export async function attachPids(session: KubeSession, pods: V1Pod[], nodes: string[]): Promise<void> {
  const byUid = new Map<string, string>()
  await Promise.all(
    nodes.map(async (name) => {
      try {
        const body = await session.core.connectGetNodeProxyWithPath({name, path: 'runningpods/'})
        const list = (typeof body === 'string' ? JSON.parse(body) : body) as {items?: V1Pod[]}
        for (const p of list.items ?? []) {
          const pids = p.metadata?.annotations?.[PodPidsAnnotation]
          if (p.metadata?.uid && pids) byUid.set(p.metadata.uid, pids)
        }
      } catch {
        /* node without a reachable kubelet API: no PIDs */
      }
    }),
  )
  for (const p of pods) {
    const pids = byUid.get(p.metadata?.uid ?? '')
    if (pids) p.metadata = {...p.metadata, annotations: {...p.metadata?.annotations, [PodPidsAnnotation]: pids}}
  }
}
