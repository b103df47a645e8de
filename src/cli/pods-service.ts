import type {V1Pod} from '@kubernetes/client-node'
import {ListFirst, runWatchLoop} from '../emulator/kube/watch-loop.js'
import type {PodWatchHandle, WatchEventType} from '../kubectl/pod-watch.js'
import type {KubeSession} from './session.js'
import {
  NodeMarkerLabel,
  PodNetworkAnnotation,
  PodPidsAnnotation,
  PodRelayAnnotation,
  PodSandboxAnnotation,
  PodWallsAnnotation,
  RelayAnnotation,
  SandboxLabel,
  WallsAnnotation,
} from '../common/labels.js'

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
  return pods.sort((a, b) => (a.metadata?.namespace ?? '').localeCompare(b.metadata?.namespace ?? '') || (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''))
}

export interface PodList {
  pods: V1Pod[]
  nodes: string[]
  /** The newest resourceVersion seen, to start a watch from. */
  resourceVersion?: string
}

/** The pods of the vnode nodes (or of --node) that the query selects. */
export async function listVnodePods(session: KubeSession, q: PodQuery): Promise<PodList> {
  return listPodsOn(session, q, await vnodeNodeNames(session, q.node))
}

/** One list per node with a spec.nodeName field selector, so the server filters and big clusters stay cheap. */
export async function listPodsOn(session: KubeSession, q: PodQuery, nodes: string[]): Promise<PodList> {
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

/** The first wait before re-opening a watch or relisting after a failure; it doubles up to DefaultRewatchMaxDelayMs. */
export const DefaultRewatchDelayMs = 500
/** A watch that keeps failing is retried this often at most: soon enough for someone looking at it. */
export const DefaultRewatchMaxDelayMs = 5_000

export interface PodChange {
  type: WatchEventType
  pod: V1Pod
}

/**
 * What a relist shows that the watch missed, against the pods already
 * shown (by UID): the ones gone (as deletions), then new ones (ADDED) and
 * changed ones (MODIFIED, by resourceVersion). A pod whose resourceVersion
 * did not change is not in it: it was printed as it is.
 */
export function relistChanges(known: ReadonlyMap<string, V1Pod>, listed: V1Pod[], now = new Date()): PodChange[] {
  const listedUids = new Set(listed.map((p) => p.metadata?.uid))
  const changes: PodChange[] = []
  for (const [uid, pod] of known) {
    if (listedUids.has(uid)) continue
    // Deleted while we were not watching: when is unknown, now is the closest we have. With a
    // deletion time the row reads Terminating, as the last row of a deleted pod does.
    const gone = pod.metadata?.deletionTimestamp ? pod : {...pod, metadata: {...pod.metadata, deletionTimestamp: now}}
    changes.push({type: 'DELETED', pod: gone})
  }
  for (const pod of listed) {
    const before = known.get(pod.metadata?.uid ?? '')
    if (!before) changes.push({type: 'ADDED', pod})
    else if (before.metadata?.resourceVersion !== pod.metadata?.resourceVersion) changes.push({type: 'MODIFIED', pod})
  }
  return changes
}

/**
 * Watches the pods of the listed nodes from the list's resourceVersion,
 * re-opening the watch when the server closes it. When the version expired
 * (410 Gone) it lists again and reports only what changed since (see
 * relistChanges), then watches from the new list. One node uses a field
 * selector; several filter on the client.
 */
export function watchVnodePods(
  session: KubeSession,
  q: PodQuery,
  from: PodList,
  onEvent: (type: WatchEventType, pod: V1Pod) => void,
  onError: (error: unknown) => void = () => undefined,
): PodWatchHandle {
  const path = q.namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(q.namespace)}/pods`
  const nodeSet = new Set(from.nodes)
  const ac = new AbortController()
  /** The pods as last reported, by UID: what a relist is compared with. */
  const known = new Map<string, V1Pod>()
  const remember = (type: WatchEventType, pod: V1Pod) => {
    const uid = pod.metadata?.uid
    if (!uid) return
    if (type === 'DELETED') known.delete(uid)
    else known.set(uid, pod)
  }
  for (const p of from.pods) remember('ADDED', p)
  const deliver = (type: WatchEventType, pod: V1Pod) => {
    if (ac.signal.aborted || !nodeSet.has(pod.spec?.nodeName ?? '')) return
    remember(type, pod)
    onEvent(type, pod)
  }
  const loop = runWatchLoop(
    {
      kc: session.kc,
      path,
      query: {labelSelector: q.labelSelector, fieldSelector: from.nodes.length === 1 ? `spec.nodeName=${from.nodes[0]}` : undefined},
      from: from.resourceVersion ?? ListFirst,
      list: async () => {
        const list = await listPodsOn(session, q, from.nodes)
        for (const c of relistChanges(known, list.pods)) deliver(c.type, c.pod)
        return list.resourceVersion
      },
      onEvent: (type, obj) => deliver(type, obj as V1Pod),
      onError,
      retryInitialMs: DefaultRewatchDelayMs,
      retryMaxMs: DefaultRewatchMaxDelayMs,
    },
    ac.signal,
  )
  let stopped!: () => void
  const stop = new Promise<void>((resolve) => (stopped = resolve))
  return {
    stop() {
      ac.abort()
      stopped()
    },
    // A list under way when stopped is not waited for.
    done: Promise.race([loop, stop]),
  }
}

/**
 * Adds each running pod's process ids (from its node's kubelet API,
 * /runningpods/, through the API server's node proxy) as an annotation on the
 * listed objects, for `-o wide`. A node that cannot be reached leaves <none>.
 */
export async function attachPids(session: KubeSession, pods: V1Pod[], nodes: string[]): Promise<void> {
  const byUid = new Map<string, string>()
  const sandboxByNode = new Map<string, string>()
  const wallsByNode = new Map<string, string>()
  const networkByNode = new Map<string, string>()
  // The node's relay pod, or '' for a node read without one (direct).
  const relayByNode = new Map<string, string>()
  await Promise.all(
    nodes.map(async (name) => {
      try {
        const meta = (await session.core.readNode({name})).metadata
        const mode = meta?.labels?.[SandboxLabel]
        if (mode) sandboxByNode.set(name, mode)
        const walls = meta?.annotations?.[WallsAnnotation]
        if (walls) wallsByNode.set(name, walls)
        const network = meta?.annotations?.[PodNetworkAnnotation]
        if (network) networkByNode.set(name, network)
        relayByNode.set(name, meta?.annotations?.[RelayAnnotation] ?? '')
      } catch {
        /* no mode to show */
      }
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
    const mode = sandboxByNode.get(p.spec?.nodeName ?? '')
    if (mode) p.metadata = {...p.metadata, annotations: {...p.metadata?.annotations, [PodSandboxAnnotation]: mode}}
    const walls = wallsByNode.get(p.spec?.nodeName ?? '')
    if (walls) p.metadata = {...p.metadata, annotations: {...p.metadata?.annotations, [PodWallsAnnotation]: walls}}
    // A hostNetwork pod is on the host whatever its node does.
    const network = p.spec?.hostNetwork ? 'host: hostNetwork' : networkByNode.get(p.spec?.nodeName ?? '')
    if (network) p.metadata = {...p.metadata, annotations: {...p.metadata?.annotations, [PodNetworkAnnotation]: network}}
    const relay = relayByNode.get(p.spec?.nodeName ?? '')
    if (relay !== undefined) p.metadata = {...p.metadata, annotations: {...p.metadata?.annotations, [PodRelayAnnotation]: relay}}
  }
}
