import type {V1Pod} from '@kubernetes/client-node'
import type {ContainerRef} from './streaming.js'

/**
 * What the kubelet API's /containerLogs and the dashboard's log pane ask of a
 * runtime (virtual-kubelet's GetContainerLogs): one container's log, the file
 * chosen from the pod's last known status as the kubelet chooses it.
 */

export type LogStream = 'stdout' | 'stderr'

/** One record of a CRI log file (the runtime writes them, the kubelet API renders them). */
export interface CriLogLine {
  time: Date
  /** The timestamp exactly as written (nanosecond precision). */
  timestamp: string
  stream: LogStream
  /** F: full line; P: partial (the line continues in the next record). */
  tag: 'F' | 'P'
  content: string
}

/** The kubelet's v1.PodLogOptions as /containerLogs decodes them (server/log-options.ts). */
export type LogStreamSelection = 'All' | 'Stdout' | 'Stderr'

export interface LogOptions {
  follow: boolean
  previous: boolean
  timestamps: boolean
  /** Epoch milliseconds; lines stamped earlier are skipped. */
  sinceMs?: number
  tailLines?: number
  limitBytes?: number
  stream: LogStreamSelection
}

export interface ContainerLogReadOptions {
  /** Start at the last n records (the kubelet's tail, on file records). */
  tailLines?: number
  /** Keep reading new records until the container instance ends or the signal aborts. */
  follow?: {signal: AbortSignal}
}

/** A log that can be read: each record in order, partial (P) records as written; onRecord returns true for no more. */
export interface ContainerLog {
  /** The container instance (restart count) whose log this is. */
  instance: number
  read(onRecord: (record: CriLogLine) => Promise<boolean | void> | boolean | void, opts: ContainerLogReadOptions): Promise<void>
}

/** Why there is no log to read, with the kubelet's HTTP status and message. */
export interface ContainerLogRefusal {
  status: 400 | 404
  message: string
}

/** The provider's log capability (virtual-kubelet's GetContainerLogs), read by the kubelet API and the dashboard. */
export interface ContainerLogs {
  getContainerLogs(ref: ContainerRef, previous: boolean): ContainerLog | ContainerLogRefusal
}

/** A pod by namespace and name as the node knows it (its status as last written), or undefined; read-only, not a copy. */
export type PodLookup = (namespace: string, name: string) => V1Pod | undefined

/** A provider that keeps no container logs: every pod is unknown to it. */
export const NoContainerLogs: ContainerLogs = {
  getContainerLogs: (ref) => ({status: 404, message: `pod "${ref.pod}" does not exist`}),
}

export function hasContainerLogs(provider: unknown): provider is ContainerLogs {
  return typeof (provider as Partial<ContainerLogs> | undefined)?.getContainerLogs === 'function'
}

export function isContainerLogRefusal(value: ContainerLog | ContainerLogRefusal): value is ContainerLogRefusal {
  return 'status' in value
}
