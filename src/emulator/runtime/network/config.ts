import {createHash} from 'node:crypto'
import {type CniConfList, CniVersion} from './cni.js'

/**
 * vnode's own network config for one node: a Linux bridge of the node's,
 * addresses from host-local out of the node's pod CIDR, no masquerade, no
 * default route in the pods (only the node's pod subnet, the service range
 * and the host's own addresses are reachable), hostPort through portmap.
 */

/** A hostPort of the pod, as CNI's portMappings capability carries it. */
export interface PortMapping {
  hostPort: number
  containerPort: number
  protocol: 'tcp' | 'udp' | 'sctp'
  hostIP?: string
}

export interface NodeNetworkConfig {
  nodeName: string
  /** IPv4 CIDR, normally the Node's spec.podCIDR. */
  podCidr: string
  /** The bridge's own address in podCidr: the pods' gateway to the host. */
  gateway: string
  bridge: string
  /** host-local's lease directory: kept in vnode's state dir, removed with the node's network. */
  ipamDir: string
  /** Service ranges (e.g. 10.0.0.0/24) and host addresses the pods route to through the host. */
  routes: string[]
}

/** A bridge name of the node's: "vnode" + 8 hex digits fits IFNAMSIZ (15). */
export function bridgeName(nodeName: string): string {
  return `vnode${createHash('sha256').update(nodeName).digest('hex').slice(0, 8)}`
}

/**
 * The pod CIDR of a node whose Node has no spec.podCIDR (no controller
 * allocates node CIDRs): a /24 of 10.89.0.0/16 chosen by the node's name.
 */
export function defaultPodCidr(nodeName: string): string {
  const n = createHash('sha256').update(nodeName).digest()[0]
  return `10.89.${n}.0/24`
}

function ipToInt(ip: string): number {
  return ip.split('.').reduce((a, o) => a * 256 + Number(o), 0)
}

function intToIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.')
}

/** The first host address of an IPv4 CIDR: the gateway, as the bridge plugin would pick it. */
export function firstHost(cidr: string): string {
  const [base, bits] = cidr.split('/')
  const mask = Number(bits)
  const net = ipToInt(base) - (ipToInt(base) % 2 ** (32 - mask))
  return intToIp(net + 1)
}

export function isIpv4Cidr(cidr: string | undefined): cidr is string {
  return typeof cidr === 'string' && /^\d{1,3}(\.\d{1,3}){3}\/(\d|[12]\d|3[0-2])$/.test(cidr) && Number(cidr.split('/')[1]) <= 30
}

export function conflist(cfg: NodeNetworkConfig): CniConfList {
  return {
    cniVersion: CniVersion,
    name: `vnode-${cfg.nodeName}`.slice(0, 63),
    plugins: [
      {
        type: 'bridge',
        bridge: cfg.bridge,
        // vnode makes the bridge and its address itself: the plugin's gateway mode would also
        // switch on the host's global ip_forward.
        isGateway: false,
        isDefaultGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{subnet: cfg.podCidr, gateway: cfg.gateway}]],
          routes: cfg.routes.map((dst) => ({dst, gw: cfg.gateway})),
          dataDir: cfg.ipamDir,
        },
      },
      // snat would masquerade connections from the host's loopback.
      {type: 'portmap', capabilities: {portMappings: true}, snat: false},
    ],
  }
}

/**
 * The chain one pod's ADD and DEL run: portmap only for a pod with
 * hostPort mappings, given them as its runtimeConfig. Without mappings
 * portmap's ADD passes the result through and makes nothing, while its DEL
 * still runs iptables to remove chains that were never made: leaving it
 * out saves a program per start and several per stop.
 */
export function podChain(list: CniConfList, portMappings: readonly PortMapping[]): CniConfList {
  const plugins = portMappings.length === 0 ? list.plugins.filter((p) => p.type !== 'portmap') : list.plugins.map((p) => (p.type === 'portmap' ? {...p, runtimeConfig: {portMappings}} : p))
  return {...list, plugins}
}

/**
 * The part of the chain that does not depend on the pod, run ahead for the
 * warm pool (sandbox-pool.ts): the bridge's veth and host-local's address.
 * Neither plugin reads the pod's identity (CNI_ARGS) nor names anything
 * after it; the lease is keyed by the CNI containerID the entry was made
 * with, which the pod's record keeps for the DEL.
 */
export function podIndependentChain(list: CniConfList): CniConfList {
  return {...list, plugins: list.plugins.filter((p) => p.type !== 'portmap')}
}

/**
 * What a pod adds to a pool entry when it leases it: its port mappings
 * (portmap, given the entry's result as prevResult); no plugin for a pod
 * without hostPorts.
 */
export function podSpecificChain(list: CniConfList, portMappings: readonly PortMapping[]): CniConfList {
  const plugins = portMappings.length === 0 ? [] : list.plugins.filter((p) => p.type === 'portmap').map((p) => ({...p, runtimeConfig: {portMappings}}))
  return {...list, plugins}
}
