import {podKey} from '../../common/pods.js'
import type {ContainerLogs} from '../provider/logs.js'
import type {V1Pod} from '@kubernetes/client-node'
import type {PodUsage} from '../provider/usage.js'
import type {SandboxPoolFigures} from '../provider/pool.js'

/**
 * What the kubelet API needs from the rest of the node, as small functions so
 * the server depends on no particular pod core or runtime. All are called on
 * each request and must be cheap and synchronous.
 */

/** The node's pods as last known, with their status (the kubelet's pod manager view). */
export type PodLister = () => V1Pod[]

/** Whether any process of the pod is alive (the kubelet's runtime cache view, for /runningpods/). */
export type RunningCheck = (pod: V1Pod) => boolean

export type {PodUsage} from '../provider/usage.js'

/** Per pod and container resource usage, measured by the process runtime. */
export type UsageSource = () => PodUsage[]

export interface KubeletSources {
  pods: PodLister
  /** Default: defaultRunningCheck(usage). */
  isRunning?: RunningCheck
  /** Default: no pods report usage (the node's own usage is still read from /proc). */
  usage?: UsageSource
  /** The provider's container logs (read per request); default: none, every pod unknown. */
  logs?: ContainerLogs
  /** The warm pool of pod sandboxes (/metrics); default, or undefined: no pool. */
  pool?: () => SandboxPoolFigures | undefined
  /** Full collections the node ran after bursts (/metrics); default, or undefined: not served. */
  heapTrims?: () => number | undefined
}

export {podKey}

/**
 * The default running-check: with a usage source, a pod is running when one
 * of its containers has a live pid there; without one, when its last known
 * status has a running container.
 */
export function defaultRunningCheck(usage: UsageSource | undefined): RunningCheck {
  return (pod) => {
    if (!usage) return (pod.status?.containerStatuses ?? []).some((s) => s.state?.running !== undefined)
    const ns = pod.metadata?.namespace ?? ''
    const name = pod.metadata?.name ?? ''
    return usage().some((p) => p.namespace === ns && p.name === name && p.containers.some((c) => c.pid !== undefined))
  }
}
