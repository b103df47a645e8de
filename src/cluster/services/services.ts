import {hostname} from 'node:os'
import {readFileSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {type FirewallSnapshot, restoreFirewall} from '../../common/host-firewall.js'
import {type CertPair, issueCert} from '../../common/pki.js'
import {freePort} from '../../common/ports.js'
import {isAlive, signal, waitGone} from '../process.js'
import {missingServiceBinaries, serviceBinaryPath} from './binaries.js'
import {asList, ClusterDomain, CoreDnsUser, coreDnsObjects, DefaultClusterDnsIp, KubeProxyUser, MetricsServerUser, metricsServerObjects} from './manifests.js'
import {removeClusterDevice, ServiceRouteInterface, setClusterAlias} from '../../common/service-route.js'
import {inProxyNetns, makeProxyNetns, type ProxyNetns, proxyNetnsFor, removeProxyNetns} from './proxy-netns.js'
import {type ServiceBinary} from './versions.js'

/**
 * kube-proxy, metrics-server and CoreDNS as host processes of the local
 * control plane (kube-proxy in the cluster's own network namespace,
 * proxy-netns.ts): started after the API server is ready, stopped before it.
 */

export const DefaultServiceStopTimeoutMs = 10_000

export interface ServicesState {
  pids: Partial<Record<ServiceBinary, number>>
  /** Only in the state of a cluster started before each cluster had a device of its own: it made vnode-svc0 here. */
  serviceRoute?: boolean
  /** Only in the state of a cluster started before kube-proxy had a namespace of its own: the device whose alias said it ran. */
  kubeProxyDevice?: {device: string; fingerprint: string}
  /** Only with kubeProxyDevice: the host's KUBE-* iptables lines before that kube-proxy started. */
  firewallBefore?: FirewallSnapshot
  /** The network namespace this cluster's kube-proxy runs in (proxy-netns.ts). */
  kubeProxyNetns?: ProxyNetns
  /** The cluster DNS address pods use, when CoreDNS runs. */
  clusterDns?: string
  clusterDomain?: string
  /** One line per service that was left out, and why. */
  skipped: string[]
}

export interface ServicesContext {
  dir: string
  server: string
  ca: CertPair
  kubectl: string
  serviceCidr: string
  /** The kube-dns Service's ClusterIP (DefaultClusterDnsIp when unset). */
  clusterDns?: string
  /** The cluster's own device that its service range is routed to (cluster-network.ts); unset without root. */
  serviceRoute?: string
  /** The /30 between the host and kube-proxy's namespace (cluster-network.ts); unset without root. */
  proxyLink?: string
  /** The cluster's pod range: kube-proxy's namespace routes it back to the host. */
  podCidr?: string
  /** The cluster's CA fingerprint, which the device's alias carries. */
  fingerprint?: string
  /** The host address services listen on and Endpoints name (Endpoints may not name loopback). */
  hostIp: string | undefined
  kubeconfigYaml: (user: CertPair, userName: string) => string
  spawn: (bin: string, args: string[], logFile: string) => Promise<number>
  log: (line: string) => void
}

type HostContext = ServicesContext & {hostIp: string}

const isRoot = () => process.getuid?.() === 0

async function clientKubeconfig(ctx: ServicesContext, name: string, commonName: string): Promise<string> {
  const pair = await issueCert(join(ctx.dir, 'pki'), ctx.ca, {name, commonName, usage: 'client'})
  const path = join(ctx.dir, `${name}.kubeconfig`)
  await writeFile(path, ctx.kubeconfigYaml(pair, commonName), {mode: 0o600})
  return path
}

async function apply(ctx: ServicesContext, objects: Array<Record<string, unknown>>): Promise<void> {
  const {execa} = await import('execa')
  await execa(ctx.kubectl, ['--kubeconfig', join(ctx.dir, 'kubeconfig'), 'apply', '--server-side', '--force-conflicts', '-f', '-'], {
    input: asList(objects),
  })
}

const logFile = (ctx: ServicesContext, name: string) => join(ctx.dir, 'logs', `${name}.log`)

async function startMetricsServer(ctx: HostContext): Promise<number> {
  const kubeconfig = await clientKubeconfig(ctx, 'metrics-server', MetricsServerUser)
  const serving = await issueCert(join(ctx.dir, 'pki'), ctx.ca, {
    name: 'metrics-server-serving',
    commonName: 'metrics-server',
    usage: 'server',
    sans: ['metrics-server.kube-system.svc', ctx.hostIp],
  })
  const port = await freePort(ctx.hostIp)
  await apply(ctx, metricsServerObjects(ctx.hostIp, port, readFileSync(ctx.ca.cert).toString('base64')))
  return ctx.spawn(
    serviceBinaryPath('metrics-server'),
    [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      `--bind-address=${ctx.hostIp}`,
      `--secure-port=${port}`,
      `--tls-cert-file=${serving.cert}`,
      `--tls-private-key-file=${serving.key}`,
      // vnode's port is the node's daemonEndpoints port, not always 10250, and its address the InternalIP.
      '--kubelet-use-node-status-port',
      '--kubelet-preferred-address-types=InternalIP',
      // The node's serving certificate is self-signed, as a kubelet's is without TLS bootstrap.
      '--kubelet-insecure-tls',
      '--metric-resolution=15s',
      '--v=0',
    ],
    logFile(ctx, 'metrics-server'),
  )
}

export function corefile(hostIp: string, port: number, kubeconfig: string): string {
  // No `forward`: names outside the cluster are not looked up off this machine.
  return [
    `.:${port} {`,
    `  bind ${hostIp}`,
    '  errors',
    `  kubernetes ${ClusterDomain} in-addr.arpa ip6.arpa {`,
    `    kubeconfig ${kubeconfig} vnode`,
    '    pods insecure',
    '    fallthrough in-addr.arpa ip6.arpa',
    '  }',
    '  cache 5',
    '}',
    '',
  ].join('\n')
}

async function startCoreDns(ctx: HostContext): Promise<number> {
  const kubeconfig = await clientKubeconfig(ctx, 'coredns', CoreDnsUser)
  const port = await freePort(ctx.hostIp)
  const file = join(ctx.dir, 'Corefile')
  await writeFile(file, corefile(ctx.hostIp, port, kubeconfig), {mode: 0o600})
  await apply(ctx, coreDnsObjects(ctx.hostIp, port, ctx.clusterDns ?? DefaultClusterDnsIp))
  return ctx.spawn(serviceBinaryPath('coredns'), ['-conf', file], logFile(ctx, 'coredns'))
}

async function startKubeProxy(ctx: HostContext, netns: ProxyNetns): Promise<number> {
  const kubeconfig = await clientKubeconfig(ctx, 'kube-proxy', KubeProxyUser)
  return ctx.spawn(
    inProxyNetns(netns)[0],
    [
      ...inProxyNetns(netns).slice(1),
      serviceBinaryPath('kube-proxy'),
      `--kubeconfig=${kubeconfig}`,
      '--proxy-mode=iptables',
      `--hostname-override=${hostname()}`,
      `--bind-address=${netns.address}`,
      // Every translated connection leaves the namespace from its own address, so the reply comes back through it.
      '--masquerade-all',
      `--healthz-bind-address=127.0.0.1:${await freePort()}`,
      `--metrics-bind-address=127.0.0.1:${await freePort()}`,
      // Leave the sysctls alone: no route_localnet, no conntrack table sizes or timeouts.
      '--iptables-localhost-nodeports=false',
      '--conntrack-max-per-core=0',
      '--conntrack-tcp-timeout-established=0',
      '--conntrack-tcp-timeout-close-wait=0',
      '--v=0',
    ],
    logFile(ctx, 'kube-proxy'),
  )
}

/**
 * Starts what the host allows; every service left out is logged with its
 * reason. On failure whatever was started is stopped again.
 */
export async function startServices(ctx: ServicesContext): Promise<ServicesState> {
  const state: ServicesState = {pids: {}, skipped: []}
  try {
    return await startEach(ctx, state)
  } catch (error) {
    await stopServices(state)
    throw error
  }
}

async function startEach(ctx: ServicesContext, state: ServicesState): Promise<ServicesState> {
  const skip = (line: string) => {
    state.skipped.push(line)
    ctx.log(line)
  }
  if (!ctx.hostIp) {
    skip('cluster services skipped: this host has no non-loopback IPv4 address for their endpoints')
    return state
  }
  const c = {...ctx, hostIp: ctx.hostIp}
  const missing = new Set(missingServiceBinaries())
  const start = async (name: ServiceBinary, fn: () => Promise<number>) => {
    if (missing.has(name)) return skip(`${name} skipped: not built (run: kubectl vnode cluster build)`)
    ctx.log(`starting ${name}`)
    state.pids[name] = await fn()
  }
  await start('metrics-server', () => startMetricsServer(c))
  await start('coredns', () => startCoreDns(c))
  if (state.pids.coredns) Object.assign(state, {clusterDns: ctx.clusterDns ?? DefaultClusterDnsIp, clusterDomain: ClusterDomain})
  if (!isRoot() || !ctx.serviceRoute || !ctx.proxyLink || !ctx.fingerprint || !ctx.podCidr) {
    skip('kube-proxy skipped: it needs root (a network namespace of its own, its rules and a route for the service range)')
  } else if (!missing.has('kube-proxy')) {
    const netns = proxyNetnsFor(ctx.serviceRoute, ctx.proxyLink, ctx.serviceCidr, ctx.fingerprint)
    // Recorded before it exists, so a stop after a failure here still removes it.
    state.kubeProxyNetns = netns
    await makeProxyNetns(netns, ctx.podCidr)
    await start('kube-proxy', () => startKubeProxy(c, netns))
  } else {
    skip('kube-proxy skipped: not built (run: kubectl vnode cluster build)')
  }
  return state
}

/**
 * Stops every service and removes kube-proxy's namespace (its rules go
 * with it) and routes the service range back to the cluster's device.
 */
export async function stopServices(state: ServicesState | undefined, timeoutMs = DefaultServiceStopTimeoutMs): Promise<void> {
  if (!state) return
  const pids = Object.values(state.pids).filter((p): p is number => p !== undefined && isAlive(p))
  for (const p of pids) signal(p, 'SIGTERM')
  const left = await waitGone(pids, timeoutMs)
  for (const p of left) signal(p, 'SIGKILL')
  await waitGone(left, 5000)
  if (state.kubeProxyNetns) await removeProxyNetns(state.kubeProxyNetns)
  // A cluster started before kube-proxy had a namespace of its own: its rules are the host's.
  if (state.pids['kube-proxy'] !== undefined && !state.kubeProxyNetns) {
    const {execa} = await import('execa')
    await execa(serviceBinaryPath('kube-proxy'), ['--cleanup', '--proxy-mode=iptables'], {reject: false, stdin: 'ignore'})
  }
  if (state.firewallBefore) await restoreFirewall(state.firewallBefore)
  if (state.kubeProxyDevice) await setClusterAlias(state.kubeProxyDevice.device, state.kubeProxyDevice.fingerprint, false)
  // The device of a cluster started before each had its own has no alias.
  if (state.serviceRoute) await removeClusterDevice(ServiceRouteInterface, undefined)
}
