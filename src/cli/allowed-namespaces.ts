import {X509Certificate} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {networkInterfaces} from 'node:os'
import {ServiceRoutePrefix} from '../common/service-route.js'
import {loadKubeConfig} from '../emulator/kube/client.js'
import {LocalClusterCaName} from '../cluster/controlplane.js'
import {UserError} from '../errors.js'

export interface AllowedNamespaces {
  /** undefined: every namespace. */
  namespaces?: string[]
  /** Said at start: which namespaces and why. */
  why: string
}

/**
 * Who may run pods on the node: `--allowed-namespaces a,b` (or `*`), else
 * every namespace on a local control plane of `kubectl vnode cluster up`
 * (its CA, on loopback or its own device of this host: the user's own cluster), else only the namespace
 * of the kubeconfig's context: on a shared cluster, a node started by one
 * user runs that user's pods, not whoever's tolerate its taint.
 */
export async function allowedNamespaces(flag: string | undefined, kube: {kubeconfig?: string; context?: string}): Promise<AllowedNamespaces> {
  if (flag !== undefined) {
    const list = flag
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
    if (list.includes('*')) return {why: 'every namespace (--allowed-namespaces *)'}
    const bad = list.find((n) => !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(n) || n.length > 63)
    if (bad !== undefined || list.length === 0) throw new UserError(`invalid --allowed-namespaces "${flag}": expected namespace names separated by commas, or *`)
    return {namespaces: list, why: `${list.join(', ')} (--allowed-namespaces)`}
  }
  const kc = await loadKubeConfig(kube)
  const cluster = kc.getCurrentCluster()!
  if (isLocalControlPlane(cluster.server, caOf(cluster))) return {why: 'every namespace (the local control plane of kubectl vnode cluster up)'}
  const ctx = kc.getContextObject(kc.getCurrentContext())
  const ns = ctx?.namespace || 'default'
  return {namespaces: [ns], why: `${ns} (the kubeconfig context's namespace; --allowed-namespaces to change)`}
}

function caOf(cluster: {caData?: string; caFile?: string}): string | undefined {
  try {
    if (cluster.caData) return Buffer.from(cluster.caData, 'base64').toString('utf8')
    if (cluster.caFile) return readFileSync(cluster.caFile, 'utf8')
  } catch {
    return undefined
  }
  return undefined
}

/** Whether host is the address of a local cluster's own device on this host (cluster/cluster-network.ts). */
function onLocalClusterDevice(host: string, interfaces = networkInterfaces()): boolean {
  return Object.entries(interfaces).some(([name, addrs]) => name.startsWith(ServiceRoutePrefix) && (addrs ?? []).some((a) => a.address === host))
}

/** A server on loopback, or on a local cluster's device of this host, whose CA is the one `cluster up` makes. */
export function isLocalControlPlane(server: string, caPem: string | undefined, interfaces = networkInterfaces()): boolean {
  let host: string
  try {
    host = new URL(server).hostname
  } catch {
    return false
  }
  if ((!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host) && !onLocalClusterDevice(host, interfaces)) || !caPem) return false
  try {
    return new X509Certificate(caPem).subject.split('\n').includes(`CN=${LocalClusterCaName}`)
  } catch {
    return false
  }
}
