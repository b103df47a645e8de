import {execa} from 'execa'
import {accessSync, constants} from 'node:fs'
import {join} from 'node:path'
import {DefaultCniPath} from './cni.js'

export type PodNetworkRequest = 'auto' | 'on' | 'off'

export interface PodNetworkDetection {
  enabled: boolean
  /** Why the pod network is off, when it is. */
  reason?: string
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
 * namespace sandbox to run containers in.
 */
export async function detectPodNetwork(requested: PodNetworkRequest, sandboxed: boolean, cniPath = DefaultCniPath): Promise<PodNetworkDetection> {
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
          : undefined
  if (reason && requested === 'on') throw new Error(`no pod network: ${reason}`)
  return reason ? {enabled: false, reason} : {enabled: true}
}
