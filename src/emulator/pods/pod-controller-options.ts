import type {CoreV1Api, KubeConfig, V1Node, V1Pod} from '@kubernetes/client-node'
import type {Clock} from '../../common/clock.js'
import type {RequestCounter} from '../kube/client.js'
import {EventReason} from '../kube/event-reasons.js'
import type {EventRecorder} from '../kube/events.js'
import type {ObjectLookup} from '../kube/object-manager.js'
import type {PodLifecycleHandler} from '../provider/handler.js'
import type {AdmissionNode} from './admission.js'
import type {MirrorOwner} from './mirror.js'
import type {StatusOverride} from './status.js'

/**
 * What the pod controller (pod-controller.ts) is given and what it emits,
 * with the statuses and grace it applies on its own: node shutdown, orphans.
 */

/** Node shutdown status (pkg/kubelet/nodeshutdown). */
export const NodeShutdownOverride: StatusOverride = {
  phase: 'Failed',
  reason: 'Terminated',
  message: 'Pod was terminated in response to imminent node shutdown.',
  keepSucceeded: true,
  conditions: [{type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: 'Pod was terminated in response to imminent node shutdown.'}],
}

/** Grace for pods the provider runs that the API no longer has (the kubelet's orphan kill). */
export const OrphanGracePeriodSeconds = 1

export interface PodControllerOptions {
  core: CoreV1Api
  /** Status writes and the final delete: a client that does not throttle, with the throttle to wait for before building each request. */
  statusWriter?: {core: CoreV1Api; throttle: () => Promise<void>}
  kc: KubeConfig
  counter?: RequestCounter
  nodeName: string
  nodeIP: string
  provider: PodLifecycleHandler
  recorder: Pick<EventRecorder, 'record' | 'forget'>
  /** The node as admission sees it (fresh labels, taints, allocatable). */
  node: () => Promise<AdmissionNode>
  resyncIntervalMs?: number
  /** The clock of the pod workers and the status manager (the real one by default; tests drive their own). */
  clock?: Clock
  statusCoalesceMs?: number
  transitionHoldMs?: number
  watchTimeoutSeconds?: number
  /** Static pod manifests: a second source, "file". */
  manifestsDir?: string
  fileCheckIntervalMs?: number
  /** The Node that owns mirror pods (default: the watched copy, else read from the API; undefined while missing or being deleted). */
  nodeOwner?: () => Promise<MirrorOwner | undefined>
  /** The node's own Node as its watch last saw it (undefined: not seen yet, or deleted). */
  watchedNode?: () => V1Node | undefined
  mirrorRetryInitialMs?: number
  /** Also record virtual-kubelet's environment events (`up --virtual-kubelet-events`), read from these objects. */
  virtualKubeletEvents?: ObjectLookup
}

/** Why a static pod manifest was skipped (the kubelet's reason for pods from a config source that fail validation). */
export const FailedValidationReason = EventReason.FailedValidation

export interface PodControllerEvents {
  pod: [pod: V1Pod]
  podRemoved: [uid: string]
  count: [count: number]
  error: [message: string]
}
