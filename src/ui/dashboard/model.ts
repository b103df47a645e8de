import type {V1NodeCondition, V1Pod} from '@kubernetes/client-node'
import {podRequests} from '../../emulator/pod-requests.js'

/**
 * What the dashboard draws: its rows, events and header as plain data, the
 * tone of a row, requests and usage as the header prints them, and the sort
 * orders. Pure: the store (store.ts) keeps it up to date from the feed.
 */

export type SortKey = 'namespace' | 'name' | 'status' | 'restarts' | 'age' | 'cpu' | 'mem'
export const SortKeys: SortKey[] = ['namespace', 'name', 'status', 'restarts', 'age', 'cpu', 'mem']

/** How a row is coloured, as k9s does: by what the STATUS column says. */
export type Tone = 'ok' | 'pending' | 'completed' | 'failed' | 'terminating'

export interface PodView {
  uid: string
  namespace: string
  name: string
  ready: string
  status: string
  restarts: string
  restartCount: number
  age: string
  createdMs: number
  pid: string
  cpu: string
  mem: string
  cpuCores?: number
  memBytes?: number
  tone: Tone
  pod: V1Pod
}

export interface EventLine {
  time: Date
  type: string
  reason: string
  object: string
  uid?: string
  message: string
  count: number
}

export interface DashboardModel {
  nodeName: string
  server: string
  serverVersion: string
  /** What the node's pods run inside (its vnode.dev/sandbox label). */
  sandbox?: string
  /** The walls its pods get (its vnode.dev/walls annotation). */
  walls?: string
  /** Where its pods' network is: `pod`, or `host: <why>` (its vnode.dev/pod-network annotation). */
  podNetwork?: string
  /** The warm pool of pod sandboxes (read at each redraw), when the node keeps one. */
  pool?: {ready: number; target: number; cap: number}
  /** Where the API server reaches its kubelet API: the relay pod (its vnode.dev/relay annotation), else direct, and the address published. */
  kubeletEndpoint?: {relay?: string; address?: string}
  now: number
  startedAt: Date
  lastLeaseRenewal?: Date
  conditions: V1NodeCondition[]
  podsUsed: number
  podsCapacity?: number
  cpuRequested: number
  memRequested: number
  cpuAllocatable?: number
  memAllocatable?: number
  rows: PodView[]
  events: EventLine[]
  steps: {step: string; detail: string}[]
  errors: string[]
  stopping: string[]
  sort: {key: SortKey; descending: boolean}
  /** Bumped on every flush. */
  version: number
}

const FailedStatuses =
  /^(Error|CrashLoopBackOff|ImagePullBackOff|ErrImagePull|ErrImageNeverPull|InvalidImageName|CreateContainerConfigError|CreateContainerError|RunContainerError|ContainerStatusUnknown|OOMKilled|Failed|Unknown|Evicted|NodeLost|OutOf.*|Unexpected.*|.*ExitCode:.*|.*Signal:.*|Init:Error|Init:CrashLoopBackOff)$/

export function toneOf(status: string, ready: string): Tone {
  if (status === 'Terminating') return 'terminating'
  if (status === 'Completed' || status === 'Succeeded') return 'completed'
  if (FailedStatuses.test(status)) return 'failed'
  if (status === 'Running') {
    const [r, t] = ready.split('/')
    return r === t ? 'ok' : 'pending'
  }
  return 'pending'
}

/**
 * A pod's effective request in cores or bytes: admission's podRequests (the
 * scheduler's count: app containers and sidecars, max'ed with each init
 * container and the sidecars before it, limits standing in for missing
 * requests, plus overhead), so the header agrees with what admission admits.
 */
export function podRequest(pod: V1Pod, resource: 'cpu' | 'memory'): number {
  let requests: Record<string, number>
  try {
    requests = podRequests(pod)
  } catch {
    return 0 // an invalid quantity never reached a running pod
  }
  const v = requests[resource] ?? 0
  return resource === 'cpu' ? v / 1000 : v
}

export function formatCores(cores: number): string {
  const m = Math.round(cores * 1000)
  if (m === 0) return '0'
  return m >= 1000 && m % 1000 === 0 ? String(m / 1000) : `${m}m`
}

export function formatMem(bytes: number): string {
  if (bytes === 0) return '0'
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(1)}Gi`
  if (bytes >= 2 ** 20) return `${Math.round(bytes / 2 ** 20)}Mi`
  return `${Math.round(bytes / 1024)}Ki`
}

export function compareRows(key: SortKey): (a: PodView, b: PodView) => number {
  const byName = (a: PodView, b: PodView) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name)
  switch (key) {
    case 'name':
      return (a, b) => a.name.localeCompare(b.name) || byName(a, b)
    case 'status':
      return (a, b) => a.status.localeCompare(b.status) || byName(a, b)
    case 'restarts':
      return (a, b) => a.restartCount - b.restartCount || byName(a, b)
    case 'age':
      // Youngest first, as "sorted by age" reads in kubectl.
      return (a, b) => b.createdMs - a.createdMs || byName(a, b)
    case 'cpu':
      return (a, b) => (a.cpuCores ?? -1) - (b.cpuCores ?? -1) || byName(a, b)
    case 'mem':
      return (a, b) => (a.memBytes ?? -1) - (b.memBytes ?? -1) || byName(a, b)
    default:
      return byName
  }
}
