import type {CriLogLine} from '../runtime/log-layout.js'
import type {ContainerRef} from './streaming.js'

/**
 * What the kubelet API's /containerLogs and the dashboard's log pane ask of a
 * runtime (virtual-kubelet's GetContainerLogs): one container's log, the file
 * chosen from the pod's last known status as the kubelet chooses it.
 */

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

export interface ContainerLogs {
  getContainerLogs(ref: ContainerRef, previous: boolean): ContainerLog | ContainerLogRefusal
}

export function isContainerLogRefusal(value: ContainerLog | ContainerLogRefusal): value is ContainerLogRefusal {
  return 'status' in value
}
