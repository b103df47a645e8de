import type {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {type NetworkInterfaceInfo, networkInterfaces} from 'node:os'
import {proxyLinkDevice, ServiceRoutePrefix} from '../../../common/service-route.js'
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

/** The network of an address with its prefix length, as a CIDR ('198.19.0.1/30' → '198.19.0.0/30'). */
function networkOf(cidr: string): string {
  const [addr, bits] = cidr.split('/')
  const n = addr.split('.').reduce((s, o) => s * 256 + Number(o), 0)
  const size = 2 ** (32 - Number(bits))
  const base = n - (n % size)
  return `${[24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256).join('.')}/${bits}`
}

/**
 * The host's own IPv4 addresses (not loopback): pods reach the host on
 * them. Of the local clusters' devices only the address of the node's own
 * API server (the kubeconfig's), never another cluster's, and the link to
 * that cluster's kube-proxy namespace: a Service's connections come to
 * pods from its address, and the replies go back through it.
 */
export function hostRoutes(server: string | undefined, interfaces = networkInterfaces()): string[] {
  const apiHost = server ? serverHostname(server) : undefined
  const v4 = (addrs: NetworkInterfaceInfo[] | undefined) => (addrs ?? []).filter((a) => a.family === 'IPv4' && !a.internal)
  const own = Object.entries(interfaces).find(([name, addrs]) => name.startsWith(ServiceRoutePrefix) && v4(addrs).some((a) => a.address === apiHost))?.[0]
  const link = own ? v4(interfaces[proxyLinkDevice(own)]).map((a) => networkOf(a.cidr ?? `${a.address}/32`)) : []
  const addresses = Object.entries(interfaces)
    .flatMap(([name, addrs]) => v4(addrs).filter((a) => !name.startsWith(ServiceRoutePrefix) || a.address === apiHost))
    .filter((a) => !a.address.startsWith('169.254.'))
    .map((a) => `${a.address}/32`)
  return [...addresses, ...link]
}

/** The node's pod network, configured from its Node and the cluster's service ranges. */
export async function createPodNetwork(inputs: NodeNetworkInputs): Promise<PodNetwork> {
  const podCidr = await nodePodCidr(inputs.core, inputs.nodeName, inputs.waitMs ?? DefaultPodCidrWaitMs)
  const routes = [...(await serviceCidrs(inputs.kc)), ...hostRoutes(inputs.kc?.getCurrentCluster()?.server)]
  return new PodNetwork({nodeName: inputs.nodeName, podCidr, stateDir: inputs.stateDir, routes, pool: inputs.pool, log: inputs.log})
}
