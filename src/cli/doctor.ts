import {type DoctorCheck, type DoctorReport, type Family, Families, type Fix, modeLine} from '../kubectl/doctor-report.js'
import {endpointCheck, type NodeEndpointFacts, relayCheck, type RelayFacts, type RelayRequest} from './doctor-endpoint.js'

/**
 * `kubectl vnode doctor`'s verdicts: from what was found on this host and
 * in the cluster (facts gathered by the runtime's own detection, the same
 * `up` runs) and what the flags ask for, one check per capability, with why
 * and the command that would give it. Pure: tested without a host.
 */

export interface DoctorRequest {
  sandbox: 'auto' | 'namespaces' | 'none'
  cgroups: 'auto' | 'v1' | 'v2' | 'none'
  podNetwork: 'auto' | 'on' | 'off'
  /** --port as given; undefined: the default (10250, or any free port). */
  port?: number
  relay: RelayRequest
}

export interface HostFacts {
  /** PRETTY_NAME of /etc/os-release, else the platform. */
  os: string
  family?: Family
  uid: number
  /** The trial sandbox's outcome (detectSandbox). */
  sandbox: {mode: 'namespaces' | 'none'; reason?: string}
  /** Found on PATH. */
  programs: {bwrap: boolean; nsenter: boolean; iptables: boolean}
  /** wallNames(withFsWalls(nodeWalls(mode), ...)): what a pod gets, the writable layer as the trial found it. */
  walls: string[]
  /** Any user, group and capability set in a container (root with the sandbox). */
  identity: boolean
  /** The writable layer per container (detectRootLayer), in the sandbox. */
  layer?: {ok: boolean; how: string}
  /** detectCgroups for the request. */
  cgroups: {mode: 'v1' | 'v2' | 'none'; reason?: string}
  /** A cgroup v2 (unified) host: a delegated subtree is the way without root. */
  cgroupV2: boolean
  /** detectPodNetwork for the host (auto, or off when asked). */
  podNetwork: {enabled: boolean; reason?: string}
  cniPath: string
  cniMissing: string[]
  /** The kubelet port asked for (or the default) and whether it can be bound. */
  port: {port: number; free: boolean}
}

export interface ClusterFacts {
  server?: string
  context?: string
  reachable: boolean
  /** Why it cannot be reached, as kubectl says it. */
  error?: string
  version?: string
  /** The API server is on this host's loopback (the local control plane of `cluster up`). */
  loopback: boolean
  /** Why `--pod-network auto` stays off with this API server, where the host would allow it (the runtime's rule, asked by the caller). */
  podNetworkAutoOff?: string
  /** The kube-dns Service's ClusterIP, and whether this host routes it to vnode's service device (kube-proxy runs here). */
  dns?: {ip: string; routedHere: boolean}
  metrics: {available: boolean; why: string}
  /** The local control plane of `cluster up` at this server, when found: whether its own kube-proxy runs, and why not. */
  localServices?: {kubeProxy: boolean; skipped?: string}
  /** Whether up could make a relay pod (rights and nodes for it). */
  relay?: RelayFacts
  /** The vnode nodes checked: how the API server reaches each one's kubelet API. */
  nodes?: NodeEndpointFacts[]
}

/** Package names per family. */
const Packages: Record<'bubblewrap' | 'nsenter' | 'cni' | 'iptables', Record<Family, string>> = {
  bubblewrap: {debian: 'bubblewrap', fedora: 'bubblewrap', arch: 'bubblewrap'},
  nsenter: {debian: 'util-linux', fedora: 'util-linux', arch: 'util-linux'},
  cni: {debian: 'containernetworking-plugins', fedora: 'containernetworking-plugins', arch: 'cni-plugins'},
  iptables: {debian: 'iptables', fedora: 'iptables-nft', arch: 'iptables'},
}
type Package = keyof typeof Packages

/** The install command for these packages, per family; as root without sudo. */
export function installCommands(packages: Package[], uid: number, cniPath = '/usr/lib/cni'): Record<Family, string> {
  const sudo = uid === 0 ? '' : 'sudo '
  const names = (f: Family) => [...new Set(packages.map((p) => Packages[p][f]))].join(' ')
  // Fedora's plugins go to /usr/libexec/cni; vnode runs them from /usr/lib/cni.
  const fedoraLink = packages.includes('cni') ? ` && { [ -e ${cniPath} ] || ${sudo}ln -s /usr/libexec/cni ${cniPath}; }` : ''
  return {
    debian: `${sudo}apt-get install -y ${names('debian')}`,
    fedora: `${sudo}dnf install -y ${names('fedora')}${fedoraLink}`,
    arch: `${sudo}pacman -S --needed ${names('arch')}`,
  }
}

const packagesFix = (packages: Package[], uid: number, text?: string, cniPath?: string): Fix => ({...(text ? {text} : {}), byFamily: installCommands(packages, uid, cniPath)})

const UsernsSysctls =
  'allow unprivileged user namespaces (sysctl user.max_user_namespaces above 0; kernel.unprivileged_userns_clone=1 on older Debian kernels; kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 23.10 and later), or run as root'

function sandboxFix(h: HostFacts): Fix {
  if (!h.programs.bwrap) return packagesFix(['bubblewrap'], h.uid)
  return {text: UsernsSysctls}
}

const BarePods = "pods run as bare host processes: they see the host's files and processes, volumes only under $VNODE_VOLUME_ROOT, no pod network"

function sandboxCheck(h: HostFacts, r: DoctorRequest): DoctorCheck {
  const base = {id: 'sandbox', capability: 'pod sandbox'} as const
  if (r.sandbox === 'none') return {...base, verdict: 'off', why: 'asked for with --sandbox none', cost: BarePods, fix: {text: 'drop --sandbox none'}}
  if (h.sandbox.mode === 'none') return {...base, verdict: 'missing', why: h.sandbox.reason ?? 'the host allows no sandbox', cost: BarePods, fix: sandboxFix(h), unmet: r.sandbox === 'namespaces'}
  const how = `mount, PID and UTS namespaces (bubblewrap${h.uid === 0 ? '' : ', in a user namespace'})`
  if (!h.programs.nsenter) {
    return {...base, verdict: 'missing', why: `${how}, but nsenter is not installed`, cost: 'kubectl exec, probes and hooks cannot enter a container', fix: packagesFix(['nsenter'], h.uid)}
  }
  return {...base, verdict: 'ok', why: how}
}

function wallsCheck(h: HostFacts, r: DoctorRequest): DoctorCheck {
  const base = {id: 'walls', capability: 'pod walls'} as const
  const walls = h.walls.join(',')
  if (h.sandbox.mode === 'none' || r.sandbox === 'none') {
    const off = r.sandbox === 'none'
    return {
      ...base,
      verdict: off ? 'off' : 'missing',
      why: `${walls}: no namespaces, no read-only root, no no_new_privs without the sandbox`,
      cost: 'a spec asking for readOnlyRootFilesystem, allowPrivilegeEscalation: false or another user waits in CreateContainerConfigError',
      fix: off ? {text: 'drop --sandbox none'} : sandboxFix(h),
    }
  }
  const lacking: string[] = []
  const costs: string[] = []
  const fixes: string[] = []
  if (!h.identity) {
    lacking.push(`only uid ${h.uid}`)
    costs.push(`a container asking for another user, group or capabilities waits in CreateContainerConfigError`)
    fixes.push('run as root for any user and capability set')
  }
  if (h.layer && !h.layer.ok) {
    lacking.push(h.layer.how)
    costs.push('writes outside volumes fail with EROFS')
    fixes.push('overlayfs in a user namespace needs Linux 5.11 or later; as root it needs only overlayfs')
  }
  if (lacking.length === 0) return {...base, verdict: 'ok', why: walls}
  return {...base, verdict: 'missing', why: `${walls}; ${lacking.join('; ')}`, cost: costs.join('; '), fix: {text: fixes.join('; ')}}
}

function cgroupsCheck(h: HostFacts, r: DoctorRequest): DoctorCheck {
  const base = {id: 'cgroups', capability: 'cgroups v1/v2'} as const
  const cost = 'memory and CPU limits are not enforced (a LimitsNotEnforced Warning per pod with limits); usage is read from /proc'
  if (r.cgroups === 'none') return {...base, verdict: 'off', why: 'asked for with --cgroups none', cost, fix: {text: 'drop --cgroups none'}}
  if (h.cgroups.mode !== 'none') return {...base, verdict: 'ok', why: `cgroup ${h.cgroups.mode}: limits enforced, usage from the kernel's accounting`}
  const delegate = 'systemd-run --user --scope -p Delegate=yes kubectl vnode up'
  const fix: Fix =
    h.uid === 0
      ? {
          text: h.cgroupV2 ? 'run vnode in a delegated cgroup of its own' : 'mount the cgroup v1 controllers (memory, cpu, pids)',
          ...(h.cgroupV2 ? {command: 'systemd-run --scope -p Delegate=yes kubectl vnode up'} : {}),
        }
      : h.cgroupV2
        ? {text: 'run as root, or in a delegated cgroup v2 subtree', command: delegate}
        : {text: 'run as root (cgroup v1 is not delegated to users)'}
  return {...base, verdict: 'missing', why: h.cgroups.reason ?? 'no cgroup can be made', cost, fix, unmet: r.cgroups !== 'auto'}
}

function podNetworkFix(h: HostFacts): Fix {
  const packages: Package[] = []
  if (!h.programs.bwrap && h.sandbox.mode === 'none') packages.push('bubblewrap')
  if (h.cniMissing.length) packages.push('cni')
  if (!h.programs.iptables) packages.push('iptables')
  const root = h.uid !== 0 ? 'run as root' : undefined
  const sandbox = h.sandbox.mode === 'none' && h.programs.bwrap ? 'the pod sandbox first' : undefined
  const text = [root, sandbox].filter(Boolean).join('; ') || undefined
  return packages.length ? packagesFix(packages, h.uid, text, h.cniPath) : {text: text ?? 'see why'}
}

function podNetworkCheck(h: HostFacts, c: ClusterFacts | undefined, r: DoctorRequest): DoctorCheck {
  const base = {id: 'pod-network', capability: 'pod network'} as const
  const cost = "pods share the host's network: the pod IP is the node IP, two replicas cannot listen on one port"
  if (r.podNetwork === 'off') return {...base, verdict: 'off', why: 'asked for with --pod-network off', cost, fix: {text: 'drop --pod-network off'}}
  if (r.sandbox === 'none') return {...base, verdict: 'off', why: 'it runs in the pod sandbox, turned off with --sandbox none', cost, fix: {text: 'drop --sandbox none'}, unmet: r.podNetwork === 'on'}
  const extra: string[] = []
  if (h.cniMissing.length && !/CNI plugins/.test(h.podNetwork.reason ?? '')) extra.push(`CNI plugins missing in ${h.cniPath}: ${h.cniMissing.join(', ')}`)
  if (!h.programs.iptables && !/iptables/.test(h.podNetwork.reason ?? '')) extra.push('iptables is not on PATH')
  if (!h.podNetwork.enabled) {
    return {...base, verdict: 'missing', why: [h.podNetwork.reason ?? 'the host allows none', ...extra].join('; '), cost, fix: podNetworkFix(h), unmet: r.podNetwork === 'on'}
  }
  if (r.podNetwork === 'auto' && c?.podNetworkAutoOff) {
    return {
      ...base,
      verdict: 'off',
      why: `this host allows it, but auto leaves it off: ${c.podNetworkAutoOff}`,
      cost,
      fix: {text: 'ask for it', command: 'kubectl vnode up --pod-network on'},
    }
  }
  return {...base, verdict: 'ok', why: `a network namespace and address per pod (CNI plugins in ${h.cniPath}, iptables)`}
}

function portCheck(h: HostFacts, r: DoctorRequest): DoctorCheck {
  const base = {id: 'kubelet-port', capability: 'kubelet port'} as const
  if (h.port.free) return {...base, verdict: 'ok', why: `${h.port.port} is free (logs, exec, metrics are served there)`}
  if (r.port === undefined) return {...base, verdict: 'ok', why: `${h.port.port} is in use: up takes a free port, which the Node's daemonEndpoints names`}
  if (r.port === 0) return {...base, verdict: 'ok', why: 'any free port (--port 0)'}
  const low = r.port < 1024 && h.uid !== 0
  return {
    ...base,
    verdict: 'missing',
    why: low ? `port ${r.port} is below 1024 and needs root` : `port ${r.port} is in use`,
    fix: {text: 'a free port, or any free one', command: 'kubectl vnode up --port 0'},
    unmet: true,
  }
}

function unreachable(id: 'services' | 'metrics' | 'relay', capability: string): DoctorCheck {
  return {id, capability, verdict: 'missing', why: 'not known: the cluster cannot be reached (see cluster)'}
}

function clusterChecks(h: HostFacts, c: ClusterFacts, r: DoctorRequest): DoctorCheck[] {
  const cluster: DoctorCheck = c.reachable
    ? {id: 'cluster', capability: 'cluster', verdict: 'ok', why: `${c.server} (Kubernetes ${c.version ?? 'version unknown'})${c.context ? `, context ${c.context}` : ''}`}
    : {
        id: 'cluster',
        capability: 'cluster',
        verdict: 'missing',
        why: c.error ?? 'cannot be reached',
        cost: 'up cannot register a node',
        fix: {text: 'start the local control plane, or pick a context (--context)', command: 'kubectl vnode cluster up'},
      }
  if (!c.reachable) return [cluster, unreachable('services', 'kube-proxy and cluster DNS'), unreachable('metrics', 'metrics'), unreachable('relay', 'relay for remote clusters')]
  const local = c.loopback
  const services: DoctorCheck = !c.dns
    ? {
        id: 'services',
        capability: 'kube-proxy and cluster DNS',
        verdict: 'missing',
        why: 'no kube-dns Service in kube-system',
        cost: "pods get the host's resolv.conf and cannot resolve Service names",
        fix: local
          ? {text: 'build CoreDNS and kube-proxy, then start the control plane again', command: 'kubectl vnode cluster build && kubectl vnode cluster down && kubectl vnode cluster up'}
          : {text: 'install CoreDNS in the cluster'},
      }
    : c.dns.routedHere && c.localServices && !c.localServices.kubeProxy
      ? {
          id: 'services',
          capability: 'kube-proxy and cluster DNS',
          verdict: 'missing',
          why: `kube-dns is at ${c.dns.ip}, but this cluster's kube-proxy is not running${c.localServices.skipped ? ` (${c.localServices.skipped})` : ''}: its ClusterIPs are swallowed by its own device`,
          cost: "pods get the host's resolv.conf and cannot dial this cluster's ClusterIPs",
          fix: /needs root/.test(c.localServices.skipped ?? '')
            ? {text: 'start the control plane as root (kube-proxy needs a network namespace of its own and a route)', command: 'sudo kubectl vnode cluster up'}
            : {text: "start the control plane again (each cluster's kube-proxy runs in a network namespace of its own)", command: 'kubectl vnode cluster down && kubectl vnode cluster up'},
        }
      : c.dns.routedHere
        ? {id: 'services', capability: 'kube-proxy and cluster DNS', verdict: 'ok', why: `kube-dns at ${c.dns.ip}, and this host routes Service ClusterIPs (kube-proxy runs here)`}
        : {
            id: 'services',
            capability: 'kube-proxy and cluster DNS',
            verdict: 'missing',
            why: `kube-dns is at ${c.dns.ip}, but this host does not route Service ClusterIPs (no kube-proxy for this cluster here)`,
            cost: "pods get the host's resolv.conf and cannot dial ClusterIPs",
            fix: local
              ? {
                  text:
                    h.uid === 0
                      ? 'start the control plane again (kube-proxy needs iptables in a network namespace of its own)'
                      : 'start the control plane as root (kube-proxy needs a network namespace of its own and a route)',
                  command: `${h.uid === 0 ? '' : 'sudo '}kubectl vnode cluster up`,
                }
              : {text: "not available yet: vnode runs no kube-proxy for a remote cluster's Services"},
          }
  const metrics: DoctorCheck = c.metrics.available
    ? {id: 'metrics', capability: 'metrics', verdict: 'ok', why: c.metrics.why}
    : {
        id: 'metrics',
        capability: 'metrics',
        verdict: 'missing',
        why: c.metrics.why,
        cost: 'kubectl top and autoscalers have no figures for pods',
        fix: local
          ? {text: 'build metrics-server, then start the control plane again', command: 'kubectl vnode cluster build && kubectl vnode cluster down && kubectl vnode cluster up'}
          : {text: "install metrics-server with --kubelet-insecure-tls (the node's serving certificate is self-signed)"},
      }
  return [cluster, services, metrics, relayCheck(r.relay, local, c.relay), ...(c.nodes ?? []).map(endpointCheck)]
}

/** The mode `up` would run in with these flags on this host and cluster. */
export function predictedMode(h: HostFacts, c: ClusterFacts | undefined, r: DoctorRequest): {sandbox: string; walls: string[]; cgroups: string; podNetwork: string} {
  const sandbox = r.sandbox === 'none' ? 'none' : h.sandbox.mode
  const network = r.podNetwork !== 'off' && h.podNetwork.enabled && !(r.podNetwork === 'auto' && c?.podNetworkAutoOff) && sandbox === 'namespaces'
  return {sandbox, walls: h.walls, cgroups: r.cgroups === 'none' ? 'none' : h.cgroups.mode, podNetwork: network ? 'on' : 'off'}
}

export function diagnose(h: HostFacts, c: ClusterFacts | undefined, r: DoctorRequest): DoctorReport {
  const checks = [sandboxCheck(h, r), wallsCheck(h, r), cgroupsCheck(h, r), podNetworkCheck(h, c, r), portCheck(h, r), ...(c ? clusterChecks(h, c, r) : [])]
  return {
    host: {os: h.os, ...(h.family ? {family: h.family} : {}), uid: h.uid},
    ...(c ? {cluster: {server: c.server, context: c.context, version: c.version, reachable: c.reachable}} : {}),
    checks,
    mode: modeLine(predictedMode(h, c, r)),
    ok: !checks.some((k) => k.unmet),
  }
}

/** The family of /etc/os-release's ID and ID_LIKE; undefined for others. */
export function osFamily(osRelease: string): Family | undefined {
  const field = (k: string) => new RegExp(`^${k}=["']?([^"'\\n]*)`, 'm').exec(osRelease)?.[1] ?? ''
  const ids = `${field('ID')} ${field('ID_LIKE')}`.toLowerCase().split(/\s+/)
  if (ids.some((i) => i === 'debian' || i === 'ubuntu')) return 'debian'
  if (ids.some((i) => i === 'fedora' || i === 'rhel' || i === 'centos')) return 'fedora'
  if (ids.some((i) => i === 'arch' || i === 'archlinux' || i === 'manjaro')) return 'arch'
  return Families.find((f) => ids.includes(f))
}

export function osName(osRelease: string): string | undefined {
  return /^PRETTY_NAME=["']?([^"'\n]*)/m.exec(osRelease)?.[1] || undefined
}
