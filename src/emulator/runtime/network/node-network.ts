import type {ServiceLookup} from '../../kube/service-lister.js'
import type {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {caFingerprint, deviceAlias, parseAlias, routeDevice, ServiceRoutePrefix} from '../../../common/service-route.js'
import {detectPodNetwork, type PodNetworkRequest} from './detect.js'
import type {PodNetwork} from './pod-network.js'
import {createPodNetwork} from './setup.js'
import type {PoolSizingOptions} from './pool-sizing.js'
import {sleep} from '../../kube/backoff.js'

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
export async function podNetworkFor(ctx: NodeNetworkContext, requested: PodNetworkRequest, sandboxed: boolean, log: (line: string) => void, pool?: PoolSizingOptions): Promise<PodNetwork | undefined> {
  const d = await detectPodNetwork(requested, sandboxed, undefined, ctx.kc?.getCurrentCluster()?.server)
  if (!d.enabled) {
    if (requested === 'auto') log(`pod network: off, pods use the host network: ${d.reason}`)
    return undefined
  }
  const net = await createPodNetwork({...ctx, pool, log})
  const figures = net.poolFigures()
  const warm = figures ? `, a warm pool of ${figures.floor} to ${figures.cap} namespaces` : ', no warm pool'
  log(`pod network: bridge ${net.config.bridge}, pod CIDR ${net.config.podCidr}${warm}`)
  return net
}

export {detectPodNetwork, isLoopbackServer, podNetworkSummary} from './detect.js'

/** The CA of the kubeconfig's cluster, as PEM: what names the cluster on its device. */
function clusterCa(kc: KubeConfig | undefined): string | undefined {
  const c = kc?.getCurrentCluster()
  if (c?.caData) return Buffer.from(c.caData, 'base64').toString()
  if (c?.caFile) return readFileSync(c.caFile, 'utf8')
  return undefined
}

/** How long a node waits for the kube-dns Service's first endpoint: a cluster just up mirrors its Endpoints into a slice within seconds. */
export const DefaultDnsEndpointWaitMs = 15_000

async function hasEndpoints(kc: KubeConfig | undefined, waitMs = DefaultDnsEndpointWaitMs): Promise<boolean> {
  if (!kc) return false
  const lib = await import('@kubernetes/client-node')
  const api = kc.makeApiClient(lib.DiscoveryV1Api)
  const deadline = Date.now() + waitMs
  for (;;) {
    const list = await api.listNamespacedEndpointSlice({namespace: 'kube-system', labelSelector: 'kubernetes.io/service-name=kube-dns'}).catch(() => undefined)
    if ((list?.items ?? []).some((s) => (s.endpoints ?? []).some((e) => e.conditions?.ready !== false && e.addresses.length > 0))) return true
    if (Date.now() >= deadline) return false
    await sleep(500)
  }
}

/**
 * Why the kube-dns Service's address is not this cluster's DNS here, or
 * undefined when it is: its ClusterIP routed to this cluster's own device
 * (the device's alias names the cluster's CA, service-route.ts), with this
 * cluster's kube-proxy serving the range (the alias says so) and a ready
 * endpoint. Anything less and a
 * lookup would go to another cluster's DNS, or nowhere.
 */
export async function clusterDnsProblem(ip: string | undefined, kc: KubeConfig | undefined): Promise<string | undefined> {
  if (!ip || ip === 'None') return 'the cluster has no kube-dns Service'
  const dev = await routeDevice(ip)
  const ca = clusterCa(kc)
  if (!dev?.startsWith(ServiceRoutePrefix) || !ca) return `kube-dns's address ${ip} is not routed to a local cluster's device on this host (${dev ? `it goes to ${dev}` : 'no route'})`
  const alias = await deviceAlias(dev)
  const owner = parseAlias(alias)
  if (owner.fingerprint !== caFingerprint(ca)) return `kube-dns's address ${ip} is routed to ${dev}, which is another cluster's (${alias || 'no alias'})`
  if (!owner.kubeProxy) return `no kube-proxy serves this cluster's Services on this host (the alias of ${dev} says so; one kube-proxy runs per host, see cluster up's output)`
  if (!(await hasEndpoints(kc))) return 'the kube-dns Service has no ready endpoint'
  return undefined
}

/**
 * The cluster DNS address for pods' resolv.conf: the kube-dns Service's
 * ClusterIP, used only when it is this cluster's DNS here
 * (clusterDnsProblem), so no lookup leaves the machine or reaches another
 * cluster. Otherwise [] (the host's resolvers), and warn says why.
 */
export async function clusterDnsFor(services: ServiceLookup, kc?: KubeConfig, warn?: (message: string) => void): Promise<string[]> {
  // From the node's Service watch: no request of its own.
  const svc = (await services.list('kube-system').catch(() => [])).find((s) => s.metadata?.name === 'kube-dns')
  const ip = svc?.spec?.clusterIP
  const problem = await clusterDnsProblem(ip, kc)
  if (!problem) return [ip!]
  if (svc) warn?.(`pods use the host's resolvers, not the cluster DNS: ${problem}`)
  return []
}
