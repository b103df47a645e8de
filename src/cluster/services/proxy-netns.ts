import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {networkInterfaces} from 'node:os'
import {clusterAlias, proxyLinkDevice, ServiceRoutePrefix} from '../../common/service-route.js'

/**
 * Each local cluster's kube-proxy runs in a network namespace of its own,
 * so two clusters on one host never share iptables rules: kube-proxy's
 * chains have fixed names (KUBE-SERVICES, ...), and two in one namespace
 * would rewrite each other's. Nothing of it is written to the host's
 * iptables.
 *
 * ```
 *  pod (its netns) ─▶ bridge ─▶ host: <service range> via <ns address> dev <device>-kp
 *                                    ▼
 *                      <device>-kp netns: kube-proxy's rules DNAT to an endpoint and
 *                      masquerade to the ns address, so the reply comes back this way
 *                                    ▼
 *  endpoint (a pod on a bridge, or an address of this host) ◀─ host ◀─ routes back
 * ```
 *
 * The namespace has routes only for what is on this host: the cluster's
 * pod range and the host's own addresses (of the local clusters' devices
 * only its own API server's); no default route, so a Service whose
 * endpoint is elsewhere goes nowhere. The service range itself is
 * unreachable there, so a ClusterIP no rule translates fails at once
 * instead of looping between the two namespaces. The masquerade is
 * between this host's own namespaces: every address it writes is the
 * namespace's own, and nothing it translates leaves the machine.
 *
 * The nodes of the cluster give their pods a route to the link's /30
 * (runtime/network/setup.ts): replies to the namespace's address go back
 * into it to be translated. The host side of the pair carries the
 * cluster's alias with
 * ` kube-proxy` (service-route.ts): a node tells from the device its
 * cluster DNS address is routed to that its own cluster's kube-proxy
 * serves it.
 */

export interface ProxyNetns {
  /** The namespace's name under /run/netns, and the host side of its veth pair. */
  name: string
  /** The address of the namespace's side: the service range's next hop. */
  address: string
  /** The address of the host's side: the namespace's next hop back. */
  hostAddress: string
  serviceCidr: string
  /** The device the service range is routed to while no kube-proxy runs (the cluster's dummy). */
  idleDevice: string
  fingerprint: string
}

/** The proxy namespace of the cluster whose device is `device`, on the /30 `link` (its first two addresses). */
export function proxyNetnsFor(device: string, link: string, serviceCidr: string, fingerprint: string): ProxyNetns {
  const [a, b, c, d] = link.split('/')[0].split('.').map(Number)
  const base = [a, b, c, d - (d % 4)]
  const at = (i: number) => [...base.slice(0, 3), base[3] + i].join('.')
  return {name: proxyLinkDevice(device), address: at(2), hostAddress: at(1), serviceCidr, idleDevice: device, fingerprint}
}

/** The veth's namespace side: its name inside is fixed, the namespace tells clusters apart. */
const InnerLink = 'kp0'

async function run(cmd: string, args: string[], input?: string): Promise<void> {
  const r = await execa(cmd, args, {reject: false, ...(input === undefined ? {stdin: 'ignore' as const} : {input})})
  if (r.exitCode !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${String(r.stderr).trim() || `exit ${r.exitCode}`}`)
}

const inNs = (p: ProxyNetns, args: string[]) => run('ip', ['netns', 'exec', p.name, ...args])

/**
 * The host's own IPv4 addresses, as /32s: the endpoints of Services that
 * are not pods (the API server, CoreDNS and metrics-server listen on them).
 * Of the local clusters' devices only `ownDevice`'s.
 */
export function hostEndpointAddresses(ownDevice: string, interfaces = networkInterfaces()): string[] {
  return Object.entries(interfaces)
    .filter(([name]) => !name.startsWith(ServiceRoutePrefix) || name === ownDevice)
    .flatMap(([, addrs]) => addrs ?? [])
    .filter((a) => a.family === 'IPv4' && !a.internal)
    .map((a) => `${a.address}/32`)
}

/**
 * Makes the namespace, its veth pair and routes, and routes the service
 * range into it. A namespace of the same name left by a crash is this
 * cluster's (its slot is claimed by its device) and is made anew.
 */
export async function makeProxyNetns(p: ProxyNetns, podCidr: string): Promise<void> {
  await removeProxyNetns(p)
  await run('ip', ['netns', 'add', p.name])
  try {
    await run('ip', ['link', 'add', p.name, 'type', 'veth', 'peer', 'name', InnerLink, 'netns', p.name])
    await run('ip', ['link', 'set', 'dev', p.name, 'alias', clusterAlias(p.fingerprint, true)])
    await run('ip', ['addr', 'add', `${p.hostAddress}/30`, 'dev', p.name])
    await run('ip', ['link', 'set', p.name, 'up'])
    // Per device, not the host's ip_forward: what comes back from the namespace goes on to a pod's bridge.
    await run('tee', [`/proc/sys/net/ipv4/conf/${p.name}/forwarding`], '1')
    await inNs(p, ['ip', 'link', 'set', 'lo', 'up'])
    await inNs(p, ['ip', 'addr', 'add', `${p.address}/30`, 'dev', InnerLink])
    await inNs(p, ['ip', 'link', 'set', InnerLink, 'up'])
    // The namespace's own sysctl: it forwards what kube-proxy translated back to the host.
    await run('ip', ['netns', 'exec', p.name, 'tee', '/proc/sys/net/ipv4/ip_forward'], '1')
    for (const dst of [podCidr, ...hostEndpointAddresses(p.idleDevice)]) await inNs(p, ['ip', 'route', 'replace', dst, 'via', p.hostAddress, 'dev', InnerLink])
    await inNs(p, ['ip', 'route', 'replace', 'unreachable', p.serviceCidr])
    await run('ip', ['route', 'replace', p.serviceCidr, 'via', p.address, 'dev', p.name])
  } catch (error) {
    await removeProxyNetns(p)
    throw error
  }
}

/** The command prefix that runs a program in the namespace (argv, no shell). */
export function inProxyNetns(p: ProxyNetns): string[] {
  return ['ip', 'netns', 'exec', p.name]
}

/**
 * Routes the service range back to the cluster's own dummy device (where
 * an untranslated ClusterIP is swallowed) and deletes the namespace: its
 * veth pair, addresses, routes and kube-proxy's rules go with it.
 */
export async function removeProxyNetns(p: ProxyNetns): Promise<void> {
  await execa('ip', ['route', 'replace', p.serviceCidr, 'dev', p.idleDevice], {reject: false, stdin: 'ignore'})
  if (existsSync(`/run/netns/${p.name}`)) await run('ip', ['netns', 'del', p.name])
  // The host side goes with its peer; left only if the namespace was gone first.
  await execa('ip', ['link', 'del', p.name], {reject: false, stdin: 'ignore'})
}
