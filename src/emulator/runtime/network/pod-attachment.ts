import {allContainers} from '../../../common/pods.js'
import type {V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {type PortMapping} from './config.js'
import {type PodAttachment, type PodNetwork} from './pod-network.js'

/** Where handlers reach a container on the host network: loopback. */
export const HostNetworkHandlerHost = '127.0.0.1'

/** The pod's hostPort mappings, as the kubelet hands them to CNI's portmap. */
export function portMappings(pod: V1Pod): PortMapping[] {
  const out: PortMapping[] = []
  for (const c of allContainers(pod)) {
    for (const p of c.ports ?? []) {
      if (!p.hostPort) continue
      const protocol = (p.protocol ?? 'TCP').toLowerCase() as PortMapping['protocol']
      out.push({hostPort: p.hostPort, containerPort: p.containerPort, protocol, ...(p.hostIP ? {hostIP: p.hostIP} : {})})
    }
  }
  return out
}

/**
 * One pod's place in the node's pod network: its namespace and address
 * once attached, the address handlers (probes, hooks) dial, and the podIP
 * the status reports. A pod without a network (hostNetwork, or none on
 * this node) stays on the host.
 */
export class PodNetworkAttachment {
  private current: PodAttachment | undefined

  constructor(
    private readonly network: PodNetwork | undefined,
    private readonly pod: () => V1Pod,
  ) {}

  /** True when the pod gets a namespace of its own. */
  get enabled(): boolean {
    return this.network !== undefined
  }

  get attachment(): PodAttachment | undefined {
    return this.current
  }

  /** The path of the pod's network namespace, for the containers' sandbox. */
  get netns(): string | undefined {
    return this.current?.netns
  }

  get handlerHost(): string {
    return this.current?.ip ?? HostNetworkHandlerHost
  }

  /** Attaches the pod (or finds its earlier attachment); throws with the CNI error. */
  async ensure(): Promise<void> {
    if (!this.network || this.current) return
    const pod = this.pod()
    const m = pod.metadata!
    this.current = await this.network.attach({uid: m.uid!, namespace: m.namespace!, name: m.name!, portMappings: portMappings(pod)})
  }

  /** After a vnode restart: the namespace and address the pod had, when they are still there. */
  async adopt(): Promise<void> {
    if (!this.network || this.current) return
    this.current = await this.network.attached(this.pod().metadata!.uid!)
  }

  /** The pod's processes are gone: its address goes back, its namespace and veth are removed. */
  async release(): Promise<void> {
    if (!this.network) return
    this.current = undefined
    await this.network.detach(this.pod().metadata!.uid!)
  }

  statusFields(): Pick<V1PodStatus, 'podIP' | 'podIPs'> {
    return this.current ? {podIP: this.current.ip, podIPs: [{ip: this.current.ip}]} : {}
  }
}
