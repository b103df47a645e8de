import type {ReferencedObjects} from '../kube/object-manager.js'
import type {ServiceLookup} from '../kube/service-lister.js'
import type {CoreV1Api, KubeConfig, V1Pod, V1PodStatus} from '@kubernetes/client-node'
import type {EventRecorder} from '../kube/events.js'
import type {PodUsage} from './usage.js'
import type {SandboxPoolFigures} from './pool.js'
import type {PodLookup} from './logs.js'

/** The reported condition reason by which a provider holds back the pod's sandbox (see PodLifecycleHandler). */
export const SandboxWaitingReason = 'WaitingForVolumes'
/** The reported condition reason by which a provider says the pod's sandbox is gone while the pod is not yet terminated. */
export const SandboxKilledReason = 'SandboxKilled'

/**
 * What the pod core asks of whatever runs pods. Every pod handed over is a
 * deep copy: a provider may keep and mutate it; the watch cache never sees it.
 * Errors are ClassifiedErrors (errdefs.ts).
 *
 * Status flows back only through the notifyPods callback (no polling). A
 * provider reports what it knows about containers (containerStatuses,
 * initContainerStatuses; phase/reason/message only for pod-level outcomes
 * such as DeadlineExceeded); the status manager turns that into the pod
 * status the kubelet would write (phase, conditions, IPs, startTime).
 * A provider whose pod cannot have its sandbox yet (the kubelet makes it only
 * once the pod's volumes are mounted) says so with a PodReadyToStartContainers
 * condition False with reason SandboxWaitingReason: PodReadyToStartContainers
 * stays False and the pod gets no IP until it stops saying so. One whose
 * sandbox went before the pod terminated (the kubelet kills it with the pod's
 * sidecars once its regular containers are done) says so with reason
 * SandboxKilledReason: PodReadyToStartContainers is False from then on.
 */
export interface PodLifecycleHandler {
  /** Start running the pod. Returns once started (not once ready). */
  createPod(pod: V1Pod): Promise<void>
  /** The pod's spec, labels or annotations changed (the kubelet's update rule). */
  updatePod(pod: V1Pod): Promise<void>
  /**
   * Terminate the pod's containers within gracePeriodSeconds (preStop, SIGTERM,
   * SIGKILL at the deadline). May be called again with a shorter grace while a
   * termination runs: the deadline moves closer, never further. Resolves when
   * no process of the pod is left; a notifyPods with every container
   * terminated follows. A pod the provider does not know throws NotFound.
   */
  deletePod(pod: V1Pod, gracePeriodSeconds: number): Promise<void>
  /** Forget a terminated pod entirely (sandbox, records); the pod is gone from the API. */
  cleanupPod?(pod: V1Pod): Promise<void>
  getPod(namespace: string, name: string): Promise<V1Pod | undefined>
  getPodStatus(namespace: string, name: string): Promise<V1PodStatus | undefined>
  getPods(): Promise<V1Pod[]>
  /** Registers the one status callback; must not block. The callback must not block either. */
  notifyPods(callback: (pod: V1Pod) => void): void
  /** Stop everything (node shutdown has already terminated the pods); release resources. */
  close?(): Promise<void>
  /** Per pod and container resource usage, when the provider can measure it (stats, metrics, the UI). */
  usage?(): PodUsage[]
  /** The warm pool of pod sandboxes, when the provider keeps one (the kubelet API's /metrics, the UI). */
  pool?(): SandboxPoolFigures | undefined
  /** Full collections run to give a burst's heap back (/metrics). */
  heapTrims?(): number
  // A provider that keeps container logs also implements ContainerLogs (logs.ts), as one that streams implements ContainerStreaming.
}

/** What a provider is given about its node when the emulator constructs it. */
export interface ProviderContext {
  nodeName: string
  nodeIP: string
  /** The API server's URL as this host reaches it (the kubeconfig's): what in-cluster config points pods to. */
  apiServer?: string
  stateDir: string
  /** For the TokenRequests of projected service account tokens (ConfigMaps and Secrets come from objects). */
  core: CoreV1Api
  /** The ConfigMaps and Secrets the node's pods reference, one watch each (the kubelet's managers). */
  objects: ReferencedObjects
  /** The kubeconfig, for APIs beyond core/v1 (the cluster's ServiceCIDRs for the pod network). */
  kc?: KubeConfig
  /** The cluster's Services (for containers' service environment variables), from one list+watch. */
  services: ServiceLookup
  /** Events about pods (Pulled-like Started/Killing/BackOff, Warnings). */
  recorder: EventRecorder
  /** The node's pods as the status manager last wrote them: what container logs are chosen by (the kubelet's status manager). */
  knownPod: PodLookup
}

/** Builds the provider once the node is registered. */
export type ProviderFactory = (ctx: ProviderContext) => PodLifecycleHandler | Promise<PodLifecycleHandler>
