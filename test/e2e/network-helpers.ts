import {execa} from 'execa'
import {readFileSync} from 'node:fs'
import {request} from 'node:http'
import {join} from 'node:path'
import type {ClusterNetwork} from '../../src/cluster/cluster-network.js'
import {proxyLinkDevice, routeDevice} from '../../src/common/service-route.js'

/**
 * Never dial an address whose route leaves this machine: a ClusterIP or pod
 * address is dialled only when `ip route get` names one of the local devices
 * the code under test made (the service route, a node's pod bridge).
 */
export async function assertLocalRoute(addr: string, devices: string[]): Promise<string> {
  const dev = await routeDevice(addr)
  if (!dev || !devices.includes(dev)) throw new Error(`refusing to dial ${addr}: ip route get names ${dev ?? 'no device'}, not one of ${devices.join(', ')}`)
  return dev
}

/** GET http://addr:port/path with a short timeout; the body, or the error's code. */
export function httpGet(addr: string, port: number, path = '/', timeoutMs = 3000): Promise<{status?: number; body?: string; error?: string}> {
  return new Promise((resolve) => {
    // A new connection each time (no keep-alive agent): each one is balanced across a Service's endpoints on its own.
    const req = request({host: addr, port, path, timeout: timeoutMs, agent: false}, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({status: res.statusCode, body}))
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), {code: 'ETIMEDOUT'})))
    req.on('error', (e: NodeJS.ErrnoException) => resolve({error: e.code ?? e.message}))
    req.end()
  })
}

export const isRoot = () => process.getuid?.() === 0

/** `iptables-save -t nat` of the host, or of the named network namespace; '' where iptables (or the namespace) is missing. */
export async function natRules(netns?: string): Promise<string> {
  const r = netns ? await execa('ip', ['netns', 'exec', netns, 'iptables-save', '-t', 'nat'], {reject: false}) : await execa('iptables-save', ['-t', 'nat'], {reject: false})
  return r.exitCode === 0 ? String(r.stdout) : ''
}

/** The link to the cluster's kube-proxy namespace: its service range and cluster DNS address are routed there while kube-proxy runs. Also the namespace's name. */
export function serviceDevice(net: ClusterNetwork): string {
  return proxyLinkDevice(net.device!)
}

/** The interface names on this host (those enslaved to master, when given). */
export async function links(master?: string): Promise<string[]> {
  const r = await execa('ip', ['-o', 'link', 'show', ...(master ? ['master', master] : [])], {reject: false})
  return String(r.stdout)
    .split('\n')
    .map((l) => /^\d+:\s+([^:@]+)/.exec(l)?.[1])
    .filter((n): n is string => Boolean(n))
}

/** The addresses and device `cluster up` gave the cluster in clusterDir (its state.json). */
export function clusterNetwork(clusterDir: string): ClusterNetwork {
  const state = JSON.parse(readFileSync(join(clusterDir, 'state.json'), 'utf8')) as {network?: ClusterNetwork}
  if (!state.network) throw new Error(`no network in ${clusterDir}/state.json`)
  return state.network
}

/** An address of cidr (a /24) no Service is likely to hold: the last but one. */
export function unusedAddress(cidr: string): string {
  return cidr.split('/')[0].split('.').slice(0, 3).join('.') + '.254'
}
