import type {V1NodeCondition, V1Pod} from '@kubernetes/client-node'
import type {ContainerLogs} from '../../emulator/provider/logs.js'
import type {PodUsage} from '../../emulator/provider/usage.js'
import type {SandboxPoolFigures} from '../../emulator/provider/pool.js'

export type {SandboxPoolFigures}

/** What the dashboard needs of a node snapshot (src/emulator/node/node-controller.ts NodeSnapshot). */
export interface NodeView {
  name: string
  conditions: V1NodeCondition[]
  capacity: Record<string, string>
  allocatable: Record<string, string>
  labels?: Record<string, string>
  annotations?: Record<string, string>
  /** The node IP and kubelet port the API server dials (a relay's, behind one). */
  kubeletEndpoint?: string
}

/** The event shape the emulator's recorder emits (src/emulator/kube/events.ts RecordedEvent). */
export interface FeedEvent {
  type: string
  reason: string
  message: string
  object: {kind?: string; name?: string; namespace?: string; uid?: string}
  count: number
  time: Date
}

/** One container's usage sample, flattened from the runtime's PodUsage: cumulative CPU seconds, resident memory, main pid. */
export interface ContainerSample {
  podUID: string
  container: string
  cpuSeconds: number
  memoryBytes: number
  pid?: number
}

export function flattenUsage(pods: PodUsage[]): ContainerSample[] {
  return pods.flatMap((p) => p.containers.map((c) => ({podUID: p.uid, container: c.name, cpuSeconds: c.cpuSeconds, memoryBytes: c.memoryBytes, pid: c.pid})))
}

/**
 * The feed's events and their arguments, a subset of the Emulator's
 * (src/emulator/emulator.ts EmulatorEvents): a step of the start-up, a node
 * snapshot, a lease renewal, a recorded event, an error, a stopping note, and
 * the pod feed: `pod` (the latest V1Pod with status) and `podRemoved` (a UID).
 */
export interface DashboardFeedEvents {
  step: [step: string, detail: string]
  node: [snapshot: NodeView]
  lease: [renewedAt: Date]
  event: [event: FeedEvent]
  error: [message: string]
  stopping: [detail: string]
  pod: [pod: V1Pod]
  podRemoved: [uid: string]
}

export type FeedEventName = keyof DashboardFeedEvents
export type FeedListener<K extends FeedEventName> = (...args: DashboardFeedEvents[K]) => void
/** One listener for each of the feed's events. */
export type FeedListeners = {[K in FeedEventName]: FeedListener<K>}

/** on/off as one overload per event, which an EventEmitter<EmulatorEvents> satisfies. */
type Subscribe = {
  [K in FeedEventName]: (x: (event: K, listener: FeedListener<K>) => unknown) => void
}[FeedEventName] extends (x: infer I) => void
  ? I
  : never

/**
 * The read-only feed of one node the dashboard renders; the Emulator
 * (src/emulator/emulator.ts) is one; its events are DashboardFeedEvents.
 * pods(), usage() and pool() are optional so the dashboard works with a node that
 * does not run pods yet.
 */
export interface DashboardFeed {
  readonly serverVersion: string
  readonly server: string
  readonly startedAt: Date
  readonly lastLeaseRenewal: Date | undefined
  /** The node's container logs (the runtime's reader of its CRI log files). */
  readonly containerLogs?: ContainerLogs
  node?(): NodeView | undefined
  pods?(): V1Pod[]
  usage?(): PodUsage[]
  /** The warm pool of pod sandboxes; undefined (or absent) when the node keeps none. */
  pool?(): SandboxPoolFigures | undefined
  on: Subscribe
  off: Subscribe
}

/** What the dashboard asks of the outside world: kills go through the API, never to processes. */
export interface DashboardActions {
  deletePod(namespace: string, name: string, opts: {force: boolean}): Promise<void>
  /** Graceful shutdown of the node; the dashboard shows `stopping` progress until unmounted. */
  quit(): void
}
