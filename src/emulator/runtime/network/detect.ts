import {execa} from 'execa'
import {accessSync, constants} from 'node:fs'
import {join} from 'node:path'
import {DefaultCniPath} from './cni.js'

export {DefaultCniPath}

export type PodNetworkRequest = 'auto' | 'on' | 'off'

export interface PodNetworkDetection {
  enabled: boolean
  /** Why the pod network is off, when it is: one line. */
  reason?: string
}

/** An API server only this host's loopback reaches (the local control plane of `cluster up` without root). */
export function isLoopbackServer(server: string): boolean {
  const host = serverHostname(server)?.replace(/^\[|\]$/g, '')
  return host === 'localhost' || host === '::1' || /^127\./.test(host ?? '')
}

/** The server URL's hostname; undefined for a server that is not a URL (the connect that follows says so). */
export function serverHostname(server: string): string | undefined {
  try {
    return new URL(server).hostname
  } catch {
    return undefined
  }
}

/** The one-line value of the node's vnode.dev/pod-network annotation (the NETWORK column, the dashboard). */
export function podNetworkSummary(d: PodNetworkDetection): string {
  return d.enabled ? 'pod' : `host: ${d.reason ?? 'off'}`
}

/** The plugins vnode's config chains (config.ts) plus loopback. */
export const RequiredPlugins = ['bridge', 'host-local', 'loopback', 'portmap'] as const

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * Whether this host allows a pod network: root (network namespaces, veths
 * and a bridge need CAP_NET_ADMIN in the host's namespace), the CNI plugins
 * of Debian's containernetworking-plugins, iptables for portmap, and a
 * namespace sandbox to run containers in; for auto, also an API server that
 * pods in their own network namespaces reach (server: the kubeconfig's; not
 * loopback). The one answer to "why is the pod network off" (up, doctor).
 */
export async function detectPodNetwork(requested: PodNetworkRequest, sandboxed: boolean, cniPath = DefaultCniPath, server?: string): Promise<PodNetworkDetection> {
  if (requested === 'off') return {enabled: false, reason: 'turned off (--pod-network off)'}
  const missing = RequiredPlugins.filter((p) => !executable(join(cniPath, p)))
  const reason = !sandboxed
    ? 'pods run without namespaces (--sandbox none, or the host does not allow them)'
    : process.getuid?.() !== 0
      ? 'it needs root'
      : missing.length > 0
        ? `CNI plugins missing in ${cniPath}: ${missing.join(', ')} (Debian: apt-get install containernetworking-plugins)`
        : (await execa('iptables', ['--version'], {reject: false})).exitCode !== 0
          ? 'iptables is missing (portmap needs it)'
          : requested === 'auto' && server && isLoopbackServer(server)
            ? `the API server is on loopback (${server}), which pods in their own network namespaces cannot reach; start the local control plane as root (kubectl vnode cluster up) to give it an address of its own`
            : undefined
  if (reason && requested === 'on') throw new Error(`no pod network: ${reason}`)
  return reason ? {enabled: false, reason} : {enabled: true}
}
