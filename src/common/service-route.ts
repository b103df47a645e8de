import {X509Certificate} from 'node:crypto'
import {readFile} from 'node:fs/promises'

/**
 * Service ClusterIPs are virtual: only kube-proxy's rules give them meaning.
 * As kube-proxy's IPVS mode does with kube-ipvs0, each local cluster's
 * service range is routed to a local dummy interface of its own
 * (vnode-svc<slot>), so a connection to a ClusterIP that no rule translates
 * is swallowed here instead of following the default route off this
 * machine. The same device carries the API server's address, which pods in
 * their own network namespaces reach. Where the kernel has no dummy driver,
 * an empty bridge does the same: nothing answers its ARP, so the connection
 * fails with "no route to host" within seconds.
 *
 * The device's alias names its cluster by the fingerprint of the cluster's
 * CA, so a node (which has the CA in its kubeconfig) can tell its own
 * cluster's device from another's, and `cluster down` removes only its own;
 * and the alias of the link to the cluster's kube-proxy namespace says
 * that kube-proxy serves the range (cluster/services/proxy-netns.ts).
 */

export const ServiceRoutePrefix = 'vnode-svc'
/** The device of the first local cluster on a host (slot 0). */
export const ServiceRouteInterface = `${ServiceRoutePrefix}0`

export function serviceRouteDevice(slot: number): string {
  return `${ServiceRoutePrefix}${slot}`
}

/** The host side of the link to the kube-proxy namespace of the cluster whose device is dev (also the namespace's name). */
export function proxyLinkDevice(dev: string): string {
  return `${dev}-kp`
}

/** A short, stable name of a cluster: the first 16 hex digits of its CA certificate's SHA-256 fingerprint. */
export function caFingerprint(pem: string | Buffer): string {
  return new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase().slice(0, 16)
}

/** The alias a cluster's device carries. */
export function clusterAlias(fingerprint: string, kubeProxy = false): string {
  return `vnode-cluster ${fingerprint}${kubeProxy ? ' kube-proxy' : ''}`
}

/** What an alias says: the cluster's fingerprint (undefined: not a cluster's alias) and whether its kube-proxy runs. */
export function parseAlias(alias: string | undefined): {fingerprint?: string; kubeProxy: boolean} {
  const m = /^vnode-cluster ([0-9a-f]{16})( kube-proxy)?$/.exec(alias ?? '')
  return m ? {fingerprint: m[1], kubeProxy: Boolean(m[2])} : {kubeProxy: false}
}

/** Sets the alias of a device that is the cluster's (fingerprint's); false when it is not. */
export async function setClusterAlias(dev: string, fingerprint: string, kubeProxy: boolean): Promise<boolean> {
  if (parseAlias(await deviceAlias(dev)).fingerprint !== fingerprint) return false
  return (await ip(['link', 'set', 'dev', dev, 'alias', clusterAlias(fingerprint, kubeProxy)])).ok
}

async function ip(args: string[]): Promise<{ok: boolean; stdout: string; stderr: string}> {
  const {execa} = await import('execa')
  const r = await execa('ip', args, {reject: false, stdin: 'ignore'})
  return {ok: r.exitCode === 0, stdout: String(r.stdout), stderr: String(r.stderr)}
}

/** The device's alias ('' for none), undefined when there is no such device. */
export async function deviceAlias(dev: string): Promise<string | undefined> {
  if (!/^[\w.-]{1,15}$/.test(dev)) return undefined
  return readFile(`/sys/class/net/${dev}/ifalias`, 'utf8').then(
    (a) => a.trim(),
    () => undefined,
  )
}

/**
 * Creates dev (dummy, or an empty bridge) with the cluster's alias. False
 * when dev exists already (another cluster's: creation is the claim).
 * Throws with ip's message on any other failure.
 */
export async function addClusterDevice(dev: string, alias: string): Promise<boolean> {
  if (!(await ip(['link', 'add', dev, 'type', 'dummy'])).ok) {
    const r = await ip(['link', 'add', dev, 'type', 'bridge'])
    if (!r.ok && /exists/i.test(r.stderr)) return false
    if (!r.ok) throw new Error(`ip link add ${dev}: ${r.stderr.trim()}`)
  }
  for (const args of [
    ['link', 'set', 'dev', dev, 'alias', alias],
    ['link', 'set', dev, 'up'],
  ]) {
    const r = await ip(args)
    if (!r.ok) {
      await ip(['link', 'del', dev])
      throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`)
    }
  }
  return true
}

/** Adds a /32 address and routes each cidr to the device; throws with ip's message. */
export async function configureClusterDevice(dev: string, address: string | undefined, cidrs: string[]): Promise<void> {
  for (const args of [...(address ? [['addr', 'replace', `${address}/32`, 'dev', dev]] : []), ...cidrs.map((cidr) => ['route', 'replace', cidr, 'dev', dev])]) {
    const r = await ip(args)
    if (!r.ok) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`)
  }
}

/**
 * Deletes dev (its address and route go with it) when it is the cluster's
 * (fingerprint's), never another cluster's; fingerprint undefined: a device
 * without an alias (made before devices had one).
 */
export async function removeClusterDevice(dev: string, fingerprint: string | undefined): Promise<void> {
  const alias = await deviceAlias(dev)
  if (alias === undefined) return
  if (fingerprint === undefined ? alias === '' : parseAlias(alias).fingerprint === fingerprint) await ip(['link', 'del', dev])
}

/** The device `ip route get` picks for addr: what decides whether dialling addr stays here. */
export async function routeDevice(addr: string): Promise<string | undefined> {
  const r = await ip(['-o', 'route', 'get', addr])
  return r.ok ? /\bdev (\S+)/.exec(r.stdout)?.[1] : undefined
}
