import type {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {networkInterfaces} from 'node:os'
import {ServiceRoutePrefix} from '../../../common/service-route.js'
import {isIpv4Cidr} from './config.js'
import {serverHostname} from './detect.js'
import {PodNetwork} from './pod-network.js'
import type {PoolSizingOptions} from './pool-sizing.js'

/** How long a new node waits for the controller-manager to give it spec.podCIDR. */
export const DefaultPodCidrWaitMs = 5_000

export interface NodeNetworkInputs {
  nodeName: string
  stateDir: string
  core: CoreV1Api
  kc?: KubeConfig
  waitMs?: number
  /** The warm pool's floor and cap (pool-sizing.ts); cap 0: none. */
  pool?: PoolSizingOptions
  log?: (line: string) => void
}

/** spec.podCIDR of the Node, waiting briefly for the node IPAM controller; undefined when none comes. */
async function nodePodCidr(core: CoreV1Api, name: string, waitMs: number): Promise<string | undefined> {
  const deadline = Date.now() + waitMs
  for (;;) {
    const cidr = await core.readNode({name}).then(
      (n) => [n.spec?.podCIDR, ...(n.spec?.podCIDRs ?? [])].find(isIpv4Cidr),
      () => undefined,
    )
    if (cidr || Date.now() >= deadline) return cidr
    await new Promise((r) => setTimeout(r, 250))
  }
}

/** The cluster's service ranges (networking.k8s.io/v1 ServiceCIDR), [] where the API has none. */
async function serviceCidrs(kc: KubeConfig | undefined): Promise<string[]> {
  if (!kc) return []
  const lib = await import('@kubernetes/client-node')
  const api = kc.makeApiClient(lib.NetworkingV1Api)
  const list = await api.listServiceCIDR().catch(() => undefined)
  return (list?.items ?? []).flatMap((s) => s.spec?.cidrs ?? []).filter(isIpv4Cidr)
}

/**
 * The host's own IPv4 addresses (not loopback): pods reach the host on
 * them. Of the local clusters' devices only the address of the node's own
 * API server (the kubeconfig's), never another cluster's.
 */
export function hostRoutes(server: string | undefined, interfaces = networkInterfaces()): string[] {
  const apiHost = server ? serverHostname(server) : undefined
  return Object.entries(interfaces)
    .flatMap(([name, addrs]) => (addrs ?? []).filter((a) => !name.startsWith(ServiceRoutePrefix) || a.address === apiHost))
    .filter((a) => a.family === 'IPv4' && !a.internal && !a.address.startsWith('169.254.'))
    .map((a) => `${a.address}/32`)
}

/** The node's pod network, configured from its Node and the cluster's service ranges. */
export async function createPodNetwork(inputs: NodeNetworkInputs): Promise<PodNetwork> {
  const podCidr = await nodePodCidr(inputs.core, inputs.nodeName, inputs.waitMs ?? DefaultPodCidrWaitMs)
  const routes = [...(await serviceCidrs(inputs.kc)), ...hostRoutes(inputs.kc?.getCurrentCluster()?.server)]
  return new PodNetwork({nodeName: inputs.nodeName, podCidr, stateDir: inputs.stateDir, routes, pool: inputs.pool, log: inputs.log})
}
