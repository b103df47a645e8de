import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {addClusterDevice, clusterAlias, configureClusterDevice, deviceAlias, parseAlias, removeClusterDevice, serviceRouteDevice, setClusterAlias} from '../common/service-route.js'

/**
 * The addresses of one local cluster, distinct from every other cluster's on
 * this host: slot n gives the service range 10.0.n.0/24 (kubernetes Service
 * 10.0.n.1, cluster DNS 10.0.n.10), the pod range 10.(244-n).0.0/16 and the
 * API server's address 198.18.0.(n+1), on the cluster's own dummy device
 * vnode-svc<n> that also takes the routes of the service and pod ranges
 * (the nodes' bridges take their parts of the pod range with longer
 * prefixes; the rest is swallowed here, never sent off the machine), and
 * 198.19.n.0/30 for the link to its kube-proxy's namespace
 * (services/proxy-netns.ts).
 *
 * The API server's address is local to this host and routed nowhere else:
 * pods in their own network namespaces reach it through their bridge (the
 * host delivers it locally, nothing is forwarded), and the `kubernetes`
 * Service's Endpoints may name it (Endpoints refuse loopback and link-local
 * addresses, which is why it is not 127.x or 169.254.x). 198.18.0.0/15 is
 * reserved for benchmarking (RFC 2544) and not routed on the internet; a
 * slot whose addresses any route of this host already covers is skipped.
 *
 * Without root (no device can be made), the API server stays on loopback
 * and pods stay on the host network; `reason` says so.
 */

export const MaxSlots = 32

export interface ClusterNetwork {
  /** Unset: no device, the API server on loopback. */
  slot?: number
  device?: string
  apiAddress: string
  serviceCidr: string
  podCidr: string
  kubernetesIp: string
  clusterDns: string
  /** The /30 between the host and the cluster's kube-proxy namespace; unset without a device. */
  proxyLink?: string
  /** Why the API server is on loopback, when it is. */
  reason?: string
}

export function slotNetwork(n: number): Omit<ClusterNetwork, 'reason'> {
  return {
    slot: n,
    device: serviceRouteDevice(n),
    apiAddress: `198.18.0.${n + 1}`,
    serviceCidr: `10.0.${n}.0/24`,
    podCidr: n === 0 ? '10.244.0.0/16' : `10.${244 - n}.0.0/16`,
    kubernetesIp: `10.0.${n}.1`,
    clusterDns: `10.0.${n}.10`,
    proxyLink: `198.19.${n}.0/30`,
  }
}

export const LoopbackReason = 'the local control plane was started without root, so its API server is on loopback, which pods in their own network namespaces cannot reach'

function loopbackNetwork(reason: string): ClusterNetwork {
  return {...slotNetwork(0), slot: undefined, device: undefined, proxyLink: undefined, apiAddress: '127.0.0.1', reason}
}

const toInt = (a: string) => a.split('.').reduce((s, o) => s * 256 + Number(o), 0)

function range(cidr: string): [number, number] {
  const [base, bits] = cidr.split('/')
  const size = 2 ** (32 - Number(bits ?? 32))
  const start = toInt(base) - (toInt(base) % size)
  return [start, start + size - 1]
}

/** Whether a and b share an address. */
export function overlaps(a: string, b: string): boolean {
  const [a0, a1] = range(a)
  const [b0, b1] = range(b)
  return a0 <= b1 && b0 <= a1
}

/** This host's IPv4 routes (every table) and addresses, as CIDRs; default and /0-/7 routes left out. */
async function hostPrefixes(): Promise<string[]> {
  const {execa} = await import('execa')
  const routes = await execa('ip', ['-o', '-4', 'route', 'show', 'table', 'all'], {reject: false, stdin: 'ignore'})
  const addrs = await execa('ip', ['-o', '-4', 'addr', 'show'], {reject: false, stdin: 'ignore'})
  const out: string[] = []
  for (const line of String(routes.stdout).split('\n')) {
    const dst = line
      .trim()
      .split(/\s+/)
      .find((w, i) => i <= 1 && /^\d+\.\d+\.\d+\.\d+(\/\d+)?$/.test(w))
    if (dst && Number(dst.split('/')[1] ?? 32) >= 8 && !dst.startsWith('127.')) out.push(dst.includes('/') ? dst : `${dst}/32`)
  }
  for (const m of String(addrs.stdout).matchAll(/\binet (\d+\.\d+\.\d+\.\d+)\//g)) if (!m[1].startsWith('127.')) out.push(`${m[1]}/32`)
  return out
}

export function slotIsFree(n: number, prefixes: string[]): boolean {
  const s = slotNetwork(n)
  return ![s.serviceCidr, s.podCidr, `${s.apiAddress}/32`, s.proxyLink!].some((c) => prefixes.some((p) => overlaps(c, p)))
}

const recordFile = (dir: string) => join(dir, 'network.json')

/** The slot this cluster dir had: its etcd keeps Services and Nodes with its addresses. */
async function recordedSlot(dir: string): Promise<number | undefined> {
  const rec = await readFile(recordFile(dir), 'utf8').then(
    (t) => JSON.parse(t) as {slot?: number},
    () => undefined,
  )
  return typeof rec?.slot === 'number' ? rec.slot : undefined
}

/**
 * Claims this cluster's addresses: the slot the dir had, or the first free
 * one. Creating the device is the claim, so two `cluster up` at once never
 * take the same slot. The device gets its address and route once the CA
 * exists (configure).
 */
export async function claimClusterNetwork(dir: string, fingerprint: string, loopback = false): Promise<ClusterNetwork> {
  if (loopback) return loopbackNetwork('cluster up --loopback keeps the API server on loopback, which pods in their own network namespaces cannot reach')
  if (process.getuid?.() !== 0) return loopbackNetwork(LoopbackReason)
  const alias = clusterAlias(fingerprint)
  const kept = await recordedSlot(dir)
  if (kept !== undefined) {
    const dev = serviceRouteDevice(kept)
    const owner = await deviceAlias(dev)
    if (parseAlias(owner).fingerprint === fingerprint || (await addClusterDevice(dev, alias))) return configure(slotNetwork(kept))
    throw new Error(`this cluster's addresses (${slotNetwork(kept).serviceCidr}) are another cluster's on this host now (device ${dev}, ${owner || 'no alias'}); stop that cluster, or use a new --dir`)
  }
  const prefixes = await hostPrefixes()
  for (let n = 0; n < MaxSlots; n++) {
    if (!slotIsFree(n, prefixes)) continue
    if (!(await addClusterDevice(serviceRouteDevice(n), alias))) continue
    await writeFile(recordFile(dir), JSON.stringify({slot: n}), {mode: 0o600})
    return configure(slotNetwork(n))
  }
  return loopbackNetwork(`no free address range for this cluster on this host (${MaxSlots} tried), so its API server is on loopback, which pods in their own network namespaces cannot reach`)

  async function configure(net: ClusterNetwork): Promise<ClusterNetwork> {
    try {
      await configureClusterDevice(net.device!, net.apiAddress, [net.serviceCidr, net.podCidr])
      // The dummy never says kube-proxy (the link to its namespace does); a device kept from an older start might.
      await setClusterAlias(net.device!, fingerprint, false)
      return net
    } catch (error) {
      await removeClusterDevice(net.device!, fingerprint)
      throw error
    }
  }
}

/** Removes the cluster's device (its address and route go with it), only when it is this cluster's. */
export async function releaseClusterNetwork(net: ClusterNetwork | undefined, fingerprint: string): Promise<void> {
  if (net?.device) await removeClusterDevice(net.device, fingerprint)
}
