import type {V1Pod, V1Taint} from '@kubernetes/client-node'
import {join} from 'node:path'
import {freePort, portOr} from '../common/ports.js'
import {nodesStateDir} from '../common/state-dirs.js'
import {UserError} from '../errors.js'
import type {KubeOptions} from './kube/client.js'
import type {RecordedEvent} from './kube/events.js'
import {chooseNodeIP} from './node/addresses.js'
import {goArch} from './node/host.js'
import type {NodeSnapshot} from './node/node-controller.js'
import {DefaultMaxPods, DefaultTaint, NodeMarkerLabel, type NodeSpecConfig} from './node/node-status.js'
import type {ProviderFactory} from './provider/handler.js'
import type {RelayOptions} from './relay/endpoint.js'
import {parseQuantity} from './quantity.js'
import type {AuthorizationMode} from './server/auth.js'
import type {ServingCertMode} from './server/serving-csr.js'
import type {KubeletSources} from './server/sources.js'
import {TargetKubernetesVersion, VnodeVersion} from './version.js'

/**
 * What one emulated node is configured with (its options, the events of its
 * feed, the summary of a run) and the Node spec those options make.
 */

export const DefaultKubeletPort = 10250

export interface EmulatorOptions extends KubeOptions {
  name: string
  labels?: Record<string, string>
  taints?: V1Taint[]
  defaultTaint?: boolean
  cpu?: string
  memory?: string
  pods?: number
  nodeIP?: string
  port?: number
  stateDir?: string
  reregister?: boolean
  leaseRenewIntervalMs?: number
  statusCheckIntervalMs?: number
  /** What runs the pods; without one the node registers but runs no pods. */
  provider?: ProviderFactory
  /** On stop, each pod gets min(its grace, this) seconds to terminate. */
  shutdownGraceSeconds?: number
  /** Static pod manifests (the kubelet's staticPodPath): every file is a Pod run by this node, with a mirror pod in the API. */
  manifestsDir?: string
  /** Also record virtual-kubelet's own event reasons where virtual-kubelet records them, beside the kubelet's (default off). */
  virtualKubeletEvents?: boolean
  /** Pod timing overrides (tests). */
  podResyncIntervalMs?: number
  podStatusCoalesceMs?: number
  /** Kubelet API: let unauthenticated requests through as system:anonymous (default false). */
  anonymousAuth?: boolean
  /** Kubelet API: Webhook (SubjectAccessReview, the default) or AlwaysAllow. */
  authorizationMode?: AuthorizationMode
  /** Kubelet API: CA for client certificates (default: the kubeconfig's cluster CA). */
  clientCaFile?: string
  /** The namespaces whose pods this node runs (others fail admission); undefined: every namespace. */
  allowedNamespaces?: string[]
  /** Extra annotations on the Node (the walls it builds). */
  annotations?: Record<string, string>
  /** Kubelet API: a serving certificate the cluster signs (a kubelet-serving CSR) or a self-signed one (`up --serving-cert`); default auto. */
  servingCert?: ServingCertMode
  /** How long to wait for the cluster to issue it (default: 5 s for auto, 60 s for csr). */
  servingCertWaitMs?: number
  /** Where the API server reaches the kubelet API: direct, or through a relay pod (`up --relay`); default direct, unchecked. */
  relay?: RelayOptions
  /** What the kubelet API serves; until the pod core provides them, the node has no pods. */
  kubelet?: Partial<KubeletSources>
}

/** How long stop() lets pods terminate at most (each within its own grace). */
export const DefaultShutdownGraceSeconds = 30

export type StartupStep = 'connect' | 'register' | 'cert' | 'relay' | 'ready'

export interface EmulatorEvents {
  step: [step: StartupStep, detail: string]
  node: [snapshot: NodeSnapshot]
  lease: [renewedAt: Date]
  event: [event: RecordedEvent]
  error: [message: string]
  stopping: [detail: string]
  /** The last thing stop() says: the run's cost from start to the stop request. */
  stopped: [summary: EmulatorSummary]
  /** The summary so far, on request (SIGUSR2 in `up`). */
  stats: [summary: EmulatorSummary]
  /** A pod of this node changed: spec plus the status as last written (a deep copy). */
  pod: [pod: V1Pod]
  /** A pod is gone from the API (by UID). */
  podRemoved: [uid: string]
}

/** What a run cost, reported when it stops (idle request rate is a goal: at most 7 per minute). */
export interface EmulatorSummary {
  uptimeSeconds: number
  requests: number
  requestsSinceReady: number
  secondsSinceReady: number
  byMethod: Record<string, number>
  byResource: Record<string, number>
  /** Watches open now (node and pods: 2 while running). */
  openWatches: number
  /** What is held per pod: status entries, pod workers, pods in the runtime. Zero once every pod is gone. */
  podState: {status: number; workers: number; runtime: number}
  /** Only in `stats`: resident and heap memory of the process. */
  memory?: {rssBytes: number; heapUsedBytes: number}
}

export function defaultStateDir(name: string): string {
  return join(nodesStateDir(), name)
}

/** The Kubernetes node name rules: a DNS subdomain. */
export function validateNodeName(name: string): void {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name) || name.length > 253) {
    throw new UserError(`invalid node name "${name}": must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')`)
  }
}

/** The Node this emulator registers, from its options (a bad quantity is the user's error). */
export async function nodeSpecConfig(o: EmulatorOptions, server: string): Promise<NodeSpecConfig> {
  const parse = (flag: string, v: string) => {
    try {
      return parseQuantity(v)
    } catch {
      throw new UserError(`invalid ${flag} "${v}": expected a Kubernetes quantity such as 4, 500m, 8Gi`)
    }
  }
  return {
    name: o.name,
    nodeIP: await chooseNodeIP(server, o.nodeIP),
    port: await kubeletPort(o.port),
    labels: {
      type: 'virtual-kubelet',
      'kubernetes.io/role': 'agent',
      'kubernetes.io/hostname': o.name,
      'kubernetes.io/os': process.platform,
      'kubernetes.io/arch': goArch(),
      'beta.kubernetes.io/os': process.platform,
      'beta.kubernetes.io/arch': goArch(),
      [NodeMarkerLabel]: 'true',
      ...o.labels,
    },
    annotations: o.annotations ?? {},
    taints: [...(o.defaultTaint === false ? [] : [DefaultTaint]), ...(o.taints ?? [])],
    cpu: o.cpu === undefined ? undefined : parse('--cpu', o.cpu),
    memoryBytes: o.memory === undefined ? undefined : parse('--memory', o.memory),
    pods: o.pods ?? DefaultMaxPods,
    kubeletVersion: `${TargetKubernetesVersion}-vnode.${VnodeVersion}`,
    runtimeVersion: `vnode://${VnodeVersion}`,
  }
}

/**
 * The port to serve the kubelet API on: 0 is any free port, and only the
 * default falls back to a free one when taken. A port the user chose is
 * that port or an error: a metrics-server or firewall rule aimed at it
 * would miss the node otherwise.
 */
async function kubeletPort(chosen: number | undefined): Promise<number> {
  if (chosen === 0) return freePort('0.0.0.0')
  if (chosen === undefined) return portOr(DefaultKubeletPort, '0.0.0.0')
  if ((await portOr(chosen, '0.0.0.0')) !== chosen) throw new UserError(`port ${chosen} is in use`)
  return chosen
}
