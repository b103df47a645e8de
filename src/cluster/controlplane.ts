import {spawn} from 'node:child_process'
import {openSync, closeSync} from 'node:fs'
import {mkdir, readFile, rename, rm, writeFile} from 'node:fs/promises'
import {request} from 'node:https'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {UserError} from '../errors.js'
import {findBinaries, type BinaryPaths} from './binaries.js'
import {registerStateDir} from '../common/state-dirs.js'
import {ensurePrivateDir} from '../common/pki.js'
import {createClusterCa, createPki, kubeconfigYaml, type Pki} from './cluster-pki.js'
import {claimClusterNetwork, type ClusterNetwork, releaseClusterNetwork} from './cluster-network.js'
import {caFingerprint} from '../common/service-route.js'
import {freePort, portOr} from '../common/ports.js'
import {hostAddresses} from './host.js'
import {isAlive, signal, waitGone} from './process.js'
import {aggregationArgs} from './aggregation.js'
import {type ServicesState, startServices, stopServices} from './services/services.js'

export const DefaultApiServerPort = 6443
export const DefaultReadyTimeoutMs = 90_000
export const DefaultStopTimeoutMs = 15_000
/** The controller-manager gives each node a /24 of the cluster's pod range (cluster-network.ts) as spec.podCIDR. */
export const NodeCidrMaskSize = 24
export {LocalClusterCaName} from './cluster-pki.js'

/** Components in start order; stopped in reverse. */
export const Components = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const
export type Component = (typeof Components)[number]

export interface ClusterState {
  dir: string
  server: string
  kubeconfig: string
  pids: Partial<Record<Component, number>>
  /** How each component was started, so one can be stopped and started again (fault tests). */
  commands: Partial<Record<Component, string[]>>
  ports: {apiserver: number; etcdClient: number; etcdPeer: number; controllerManager: number; scheduler: number}
  startedAt: string
  /** kube-proxy, metrics-server and CoreDNS, when started with them. */
  services?: ServicesState
  /** This cluster's addresses and device (cluster-network.ts). */
  network?: ClusterNetwork
  /** Names the cluster on its device (service-route.ts). */
  caFingerprint?: string
}

export interface ClusterOptions {
  dir: string
  binDir?: string
  /** API server port: 0 for any free port; unset picks 6443 when free, otherwise any free port. */
  port?: number
  /** node-monitor-grace-period of the node lifecycle controller, e.g. "40s". */
  nodeMonitorGracePeriod?: string
  /**
   * Extra kube-apiserver flags, appended after vnode's own (so a later one
   * wins), e.g. ["--watch-cache=false"]: a way to try vnode against server
   * behaviour the defaults hide.
   */
  apiserverArgs?: string[]
  /** Also run kube-proxy, metrics-server and CoreDNS (those the host allows). */
  services?: boolean
  /** Keep the API server on loopback, with no device of its own (pods of its nodes stay on the host network). */
  loopback?: boolean
  log?: (line: string) => void
}

export interface ComponentStatus {
  name: Component
  pid?: number
  running: boolean
}

const stateFile = (dir: string) => join(dir, 'state.json')

export async function readState(dir: string): Promise<ClusterState | undefined> {
  try {
    return JSON.parse(await readFile(stateFile(dir), 'utf8')) as ClusterState
  } catch {
    return undefined
  }
}

async function writeState(state: ClusterState): Promise<void> {
  const tmp = `${stateFile(state.dir)}.tmp`
  await writeFile(tmp, JSON.stringify(state, null, 2), {mode: 0o600})
  await rename(tmp, stateFile(state.dir))
}

export function componentStatuses(state: ClusterState): ComponentStatus[] {
  return Components.map((name) => {
    const pid = state.pids[name]
    return {name, pid, running: pid !== undefined && isAlive(pid)}
  })
}

async function spawnDaemon(bin: string, args: string[], logFile: string): Promise<number> {
  const fd = openSync(logFile, 'a', 0o600)
  try {
    // A daemon, not a job: detached in its own process group, unreferenced and
    // writing straight to its log file, so it outlives `cluster up`; `cluster
    // down` finds it again through state.json. (execa is for processes whose
    // result we await; this one has none.)
    const child = spawn(bin, args, {detached: true, stdio: ['ignore', fd, fd], env: {PATH: process.env.PATH ?? ''}})
    child.on('error', () => undefined)
    child.unref()
    if (child.pid === undefined) throw new UserError(`could not start ${bin}`)
    return child.pid
  } finally {
    closeSync(fd)
  }
}

async function tail(file: string, lines = 15): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '')
  return text.trimEnd().split('\n').slice(-lines).join('\n')
}

function get(url: string, pki: Pki): Promise<{status: number; body: string}> {
  return new Promise((resolve, reject) => {
    const req = request(url, {ca: readFileSync(pki.ca.cert), cert: readFileSync(pki.admin.cert), key: readFileSync(pki.admin.key), timeout: 3000}, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end()
  })
}

async function waitReady(state: ClusterState, pki: Pki, timeoutMs: number, log: (l: string) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    for (const c of componentStatuses(state)) {
      if (c.pid !== undefined && !c.running) {
        throw new UserError(`${c.name} exited during start-up; last lines of ${join(state.dir, 'logs', `${c.name}.log`)}:\n${await tail(join(state.dir, 'logs', `${c.name}.log`))}`)
      }
    }
    try {
      const res = await get(`${state.server}/readyz`, pki)
      if (res.status === 200) return
      last =
        res.body
          .split('\n')
          .filter((l) => l.includes('failed'))
          .join(', ') || `HTTP ${res.status}`
    } catch (error) {
      last = (error as Error).message
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  log(`API server not ready: ${last}`)
  throw new UserError(`the API server did not become ready within ${timeoutMs / 1000}s (${last}); logs are in ${join(state.dir, 'logs')}`)
}

/**
 * Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler
 * (the API server on the cluster's own address, cluster-network.ts; the
 * others on loopback) and waits until the API server reports ready. Idempotent: a
 * cluster already running in dir is reported, not started twice.
 */
export async function startCluster(opts: ClusterOptions): Promise<ClusterState> {
  const log = opts.log ?? (() => undefined)
  const existing = await readState(opts.dir)
  if (existing && componentStatuses(existing).every((c) => c.running)) {
    log(`control plane already running in ${opts.dir}`)
    return existing
  }
  if (existing) await stopCluster(opts.dir)
  findBinaries(opts.binDir)
  await ensurePrivateDir(opts.dir)
  // Every node hides this dir (its CA key) from its containers.
  registerStateDir(opts.dir)
  await mkdir(join(opts.dir, 'logs'), {recursive: true, mode: 0o700})
  log('generating certificates')
  const fingerprint = caFingerprint(readFileSync((await createClusterCa(opts.dir)).cert))
  const network = await claimClusterNetwork(opts.dir, fingerprint, opts.loopback)
  if (network.reason) log(`API server on loopback: ${network.reason}`)
  else log(`API server on ${network.apiAddress} (device ${network.device}), services ${network.serviceCidr}, pods ${network.podCidr}`)
  try {
    return await startOn(opts, network, fingerprint)
  } catch (error) {
    await stopCluster(opts.dir)
    await releaseClusterNetwork(network, fingerprint)
    throw error
  }
}

async function startOn(opts: ClusterOptions, network: ClusterNetwork, fingerprint: string): Promise<ClusterState> {
  const log = opts.log ?? (() => undefined)
  const bins: BinaryPaths = findBinaries(opts.binDir)
  const pki = await createPki(opts.dir, [network.apiAddress, network.kubernetesIp])
  // Nothing listens on a port until its component starts: the kernel may hand the same free port out twice.
  const handedOut = new Set<number>()
  const distinctFreePort = async (): Promise<number> => {
    for (;;) {
      const p = await freePort()
      if (!handedOut.has(p)) return (handedOut.add(p), p)
    }
  }
  const apiserverPort = opts.port === undefined ? await portOr(DefaultApiServerPort, network.apiAddress) : opts.port === 0 ? await distinctFreePort() : opts.port
  handedOut.add(apiserverPort)
  const ports = {
    apiserver: apiserverPort,
    etcdClient: await distinctFreePort(),
    etcdPeer: await distinctFreePort(),
    controllerManager: await distinctFreePort(),
    scheduler: await distinctFreePort(),
  }
  const server = `https://${network.apiAddress}:${ports.apiserver}`
  const kubeconfig = join(opts.dir, 'kubeconfig')
  await writeFile(kubeconfig, kubeconfigYaml(server, pki.ca.cert, pki.admin, 'vnode-admin'), {mode: 0o600})
  const cmKubeconfig = join(opts.dir, 'controller-manager.kubeconfig')
  await writeFile(cmKubeconfig, kubeconfigYaml(server, pki.ca.cert, pki.controllerManager, 'system:kube-controller-manager'), {mode: 0o600})
  const schedKubeconfig = join(opts.dir, 'scheduler.kubeconfig')
  await writeFile(schedKubeconfig, kubeconfigYaml(server, pki.ca.cert, pki.scheduler, 'system:kube-scheduler'), {mode: 0o600})

  const state: ClusterState = {dir: opts.dir, server, kubeconfig, pids: {}, commands: {}, ports, startedAt: new Date().toISOString(), network, caFingerprint: fingerprint}
  const logFile = (c: Component) => join(opts.dir, 'logs', `${c}.log`)
  const etcdClient = `http://127.0.0.1:${ports.etcdClient}`
  const etcdPeer = `http://127.0.0.1:${ports.etcdPeer}`
  const args: Record<Component, string[]> = {
    etcd: [
      '--name=vnode',
      `--data-dir=${join(opts.dir, 'etcd')}`,
      `--listen-client-urls=${etcdClient}`,
      `--advertise-client-urls=${etcdClient}`,
      `--listen-peer-urls=${etcdPeer}`,
      `--initial-advertise-peer-urls=${etcdPeer}`,
      `--initial-cluster=vnode=${etcdPeer}`,
      '--log-level=warn',
      // A local, disposable cluster: skipping fsync makes it several times faster on shared disks.
      '--unsafe-no-fsync',
    ],
    'kube-apiserver': [
      ...aggregationArgs(pki.frontProxy),
      `--etcd-servers=${etcdClient}`,
      // One address: the cluster's own on this host (pods reach it, nothing routes it off the machine), or loopback.
      `--bind-address=${network.apiAddress}`,
      `--advertise-address=${network.apiAddress}`,
      `--secure-port=${ports.apiserver}`,
      `--cert-dir=${join(opts.dir, 'pki')}`,
      `--tls-cert-file=${pki.apiserver.cert}`,
      `--tls-private-key-file=${pki.apiserver.key}`,
      `--client-ca-file=${pki.ca.cert}`,
      `--kubelet-client-certificate=${pki.kubeletClient.cert}`,
      `--kubelet-client-key=${pki.kubeletClient.key}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.sa.pub}`,
      `--service-account-signing-key-file=${pki.sa.key}`,
      `--service-cluster-ip-range=${network.serviceCidr}`,
      '--authorization-mode=Node,RBAC',
      // kubeadm's order: a node's Hostname often resolves to loopback, which the API server refuses to proxy to.
      '--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname',
      '--allow-privileged=true',
      '--profiling=false',
      '--v=0',
      ...(opts.apiserverArgs ?? []),
    ],
    'kube-controller-manager': [
      `--kubeconfig=${cmKubeconfig}`,
      `--authentication-kubeconfig=${cmKubeconfig}`,
      `--authorization-kubeconfig=${cmKubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ports.controllerManager}`,
      '--leader-elect=false',
      `--service-account-private-key-file=${pki.sa.key}`,
      `--root-ca-file=${pki.ca.cert}`,
      `--cluster-signing-cert-file=${pki.ca.cert}`,
      `--cluster-signing-key-file=${pki.ca.key}`,
      '--use-service-account-credentials=true',
      `--cert-dir=${join(opts.dir, 'pki', 'controller-manager')}`,
      ...(opts.nodeMonitorGracePeriod ? [`--node-monitor-grace-period=${opts.nodeMonitorGracePeriod}`] : []),
      '--node-monitor-period=2s',
      '--profiling=false',
      // Each node gets spec.podCIDR, which a pod network takes its addresses from.
      '--allocate-node-cidrs=true',
      `--cluster-cidr=${network.podCidr}`,
      `--node-cidr-mask-size=${NodeCidrMaskSize}`,
      `--service-cluster-ip-range=${network.serviceCidr}`,
    ],
    'kube-scheduler': [
      `--kubeconfig=${schedKubeconfig}`,
      `--authentication-kubeconfig=${schedKubeconfig}`,
      `--authorization-kubeconfig=${schedKubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ports.scheduler}`,
      '--leader-elect=false',
      `--cert-dir=${join(opts.dir, 'pki', 'scheduler')}`,
      '--profiling=false',
    ],
  }
  for (const c of Components) {
    log(`starting ${c}`)
    state.commands[c] = [bins[c], ...args[c]]
    state.pids[c] = await spawnDaemon(bins[c], args[c], logFile(c))
    await writeState(state)
    if (c === 'kube-apiserver') {
      await waitReady(state, pki, DefaultReadyTimeoutMs, log)
      log('API server ready')
    }
  }
  if (opts.services) {
    state.services = await startServices({
      dir: opts.dir,
      server,
      ca: pki.ca,
      kubectl: bins.kubectl,
      serviceCidr: network.serviceCidr,
      clusterDns: network.clusterDns,
      serviceRoute: network.device,
      proxyLink: network.proxyLink,
      podCidr: network.podCidr,
      fingerprint,
      hostIp: hostAddresses()[0],
      kubeconfigYaml: (user, name) => kubeconfigYaml(server, pki.ca.cert, user, name),
      spawn: spawnDaemon,
      log,
    })
    await writeState(state)
  }
  return state
}

/** Stops one component of a running control plane (SIGTERM, then SIGKILL). */
export async function stopComponent(dir: string, component: Component, timeoutMs = DefaultStopTimeoutMs): Promise<void> {
  const state = await readState(dir)
  const pid = state?.pids[component]
  if (!state || pid === undefined || !isAlive(pid)) return
  signal(pid, 'SIGTERM')
  const left = await waitGone([pid], timeoutMs)
  for (const p of left) signal(p, 'SIGKILL')
  await waitGone(left, 5000)
}

/** Starts one stopped component again with the command it was first started with. */
export async function startComponent(dir: string, component: Component): Promise<void> {
  const state = await readState(dir)
  const cmd = state?.commands?.[component]
  if (!state || !cmd) throw new UserError(`no control plane with ${component} in ${dir}`)
  const pid = state.pids[component]
  if (pid !== undefined && isAlive(pid)) return
  state.pids[component] = await spawnDaemon(cmd[0], cmd.slice(1), join(dir, 'logs', `${component}.log`))
  await writeState(state)
}

/** Stops every component (SIGTERM, then SIGKILL after a timeout) and forgets them. */
export async function stopCluster(dir: string, timeoutMs = DefaultStopTimeoutMs): Promise<ComponentStatus[]> {
  const state = await readState(dir)
  if (!state) return []
  const statuses = componentStatuses(state)
  await stopServices(state.services)
  for (const c of [...Components].reverse()) {
    const pid = state.pids[c]
    if (pid === undefined || !isAlive(pid)) continue
    signal(pid, 'SIGTERM')
    const left = await waitGone([pid], timeoutMs)
    for (const p of left) signal(p, 'SIGKILL')
    await waitGone(left, 5000)
  }
  await releaseClusterNetwork(state.network, state.caFingerprint ?? '')
  await rm(stateFile(dir), {force: true})
  return statuses
}
