import type {ServiceLookup} from '../../kube/service-lister.js'
import type {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {routeDevice, ServiceRouteInterface} from '../../../common/service-route.js'
import {detectPodNetwork, type PodNetworkRequest} from './detect.js'
import type {PodNetwork} from './pod-network.js'
import {createPodNetwork} from './setup.js'

export interface NodeNetworkContext {
  nodeName: string
  stateDir: string
  core: CoreV1Api
  kc?: KubeConfig
}

/**
 * The node's pod network as --pod-network asks for it: undefined (with one
 * line saying why) where the host does not allow one and auto was asked.
 */
export async function podNetworkFor(ctx: NodeNetworkContext, requested: PodNetworkRequest, sandboxed: boolean, log: (line: string) => void): Promise<PodNetwork | undefined> {
  const server = ctx.kc?.getCurrentCluster()?.server
  // auto on a loopback API server: the host network, silently (the dashboard may own the terminal by now); see the flag's help.
  if (requested === 'auto' && server && isLoopbackServer(server)) return undefined
  const d = await detectPodNetwork(requested, sandboxed)
  if (!d.enabled) {
    if (requested === 'auto') log(`pod network: off, pods use the host network: ${d.reason}`)
    return undefined
  }
  const net = await createPodNetwork(ctx)
  log(`pod network: bridge ${net.config.bridge}, pod CIDR ${net.config.podCidr}`)
  return net
}

/** An API server only this host's loopback reaches (the local control plane of `cluster up`). */
export function isLoopbackServer(server: string): boolean {
  const host = new URL(server).hostname.replace(/^\[|\]$/g, '')
  return host === 'localhost' || host === '::1' || /^127\./.test(host)
}

/**
 * The cluster DNS address for pods' resolv.conf: the kube-dns Service's
 * ClusterIP, used only when this host routes it to a local device (kube-proxy
 * and the service route are there), so no lookup leaves the machine.
 */
export async function clusterDnsFor(services: ServiceLookup): Promise<string[]> {
  // From the node's Service watch: no request of its own.
  const svc = (await services.list('kube-system').catch(() => [])).find((s) => s.metadata?.name === 'kube-dns')
  const ip = svc?.spec?.clusterIP
  if (!ip || ip === 'None') return []
  const dev = await routeDevice(ip)
  return dev === ServiceRouteInterface ? [ip] : []
}
