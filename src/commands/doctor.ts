import {Command, Flags} from '@oclif/core'
import type {DoctorRequest, HostFacts} from '../cli/doctor.js'
import {kubeFlags} from '../cli/flags.js'

const Formats = ['text', 'json'] as const

export default class Doctor extends Command {
  static override summary = "Check what this host and the current context's cluster give a vnode pod, and how to get what is missing"
  static override description =
    'One line per capability (pod sandbox, pod walls, cgroups, pod network, kubelet port, the cluster, kube-proxy and cluster DNS, metrics, the relay for remote clusters), ' +
    'and one per vnode node in the cluster: whether the API server reaches its kubelet API (logs, exec, port-forward), else the failure its answer names (unreachable, a Hostname address, a verifying API server, a k3s egress tunnel) and the fix: ' +
    'ok, missing or off, why, what going without it costs, and the command that would give it. ' +
    "The flags are up's: doctor exits 1 when something they ask for cannot work here."
  static override examples = ['kubectl vnode doctor', 'kubectl vnode doctor -o json', 'kubectl vnode doctor --sandbox namespaces --pod-network on', 'kubectl vnode doctor --host-only']

  static override flags = {
    ...kubeFlags,
    // An API server that does not answer is a verdict, so doctor does not wait forever for it.
    'request-timeout': Flags.string({description: 'how long to wait for one API request, e.g. 5s, 1m; 0 waits forever', default: '5s', helpGroup: 'KUBE'}),
    sandbox: Flags.string({description: "as up's --sandbox: namespaces fails the check where the host allows no sandbox", options: ['auto', 'namespaces', 'none'], default: 'auto'}),
    cgroups: Flags.string({description: "as up's --cgroups", options: ['auto', 'v1', 'v2', 'none'], default: 'auto'}),
    'pod-network': Flags.string({description: "as up's --pod-network: on fails the check where the host allows none", options: ['auto', 'on', 'off'], default: 'auto'}),
    port: Flags.integer({description: "as up's --port: a port given must be free", min: 0, max: 65535}),
    relay: Flags.string({description: "as up's --relay: on fails the check where up could not make a relay pod", options: ['auto', 'on', 'off'], default: 'auto'}),
    'relay-namespace': Flags.string({description: "as up's --relay-namespace: where the relay's rights are checked", default: 'vnode-system'}),
    node: Flags.string({
      description: 'a node whose kubelet endpoint to check: how the API server reaches it, or the failure and its fix (repeatable; default: every Ready vnode node)',
      multiple: true,
    }),
    'host-only': Flags.boolean({description: 'check this host only, not the cluster'}),
    output: Flags.string({char: 'o', description: 'output format', options: [...Formats], default: 'text'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Doctor)
    const request: DoctorRequest = {
      sandbox: flags.sandbox as DoctorRequest['sandbox'],
      cgroups: flags.cgroups as DoctorRequest['cgroups'],
      podNetwork: flags['pod-network'] as DoctorRequest['podNetwork'],
      port: flags.port,
      relay: flags.relay as DoctorRequest['relay'],
    }
    const {isLoopbackServer} = await import('../emulator/runtime/host.js')
    const {clusterFacts} = await import('../cli/doctor-cluster.js')
    // podNetworkFor's rule for auto: off with an API server on loopback (in-cluster config must reach it).
    const rules = {
      isLoopback: isLoopbackServer,
      podNetworkAutoOff: (server: string) => (isLoopbackServer(server) ? 'the API server is on loopback, where a pod in its own network namespace cannot reach it' : undefined),
    }
    const cluster = flags['host-only'] ? undefined : await clusterFacts(flags, rules, {relayNamespace: flags['relay-namespace'], nodes: flags.node ?? []})
    const host = await hostFacts(request)
    const {diagnose} = await import('../cli/doctor.js')
    const report = diagnose(host, cluster, request)
    if (flags.output === 'json') process.stdout.write(JSON.stringify(report, null, 2) + '\n')
    else {
      const {doctorText} = await import('../ui/doctor-output.js')
      const {colorEnabled} = await import('../ui/color.js')
      process.stdout.write(doctorText(report, {color: colorEnabled(process.stdout)}))
    }
    if (!report.ok) this.exit(1)
  }
}

/** This host, found by the runtime's own detection (the trials `up` runs), for the request. */
async function hostFacts(request: DoctorRequest): Promise<HostFacts> {
  const {accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync} = await import('node:fs')
  const {tmpdir} = await import('node:os')
  const {delimiter, join} = await import('node:path')
  const {portOr} = await import('../common/ports.js')
  const {DefaultKubeletPort} = await import('../emulator/emulator-config.js')
  const rt = await import('../emulator/runtime/host.js')
  const {osFamily, osName} = await import('../cli/doctor.js')
  const executable = (p: string) => {
    try {
      accessSync(p, constants.X_OK)
      return true
    } catch {
      return false
    }
  }
  const onPath = (name: string) => (process.env.PATH ?? '').split(delimiter).some((d) => d && executable(join(d, name)))
  const osRelease = (() => {
    try {
      return readFileSync('/etc/os-release', 'utf8')
    } catch {
      return ''
    }
  })()
  const uid = process.getuid?.() ?? 0
  // A request for namespaces is judged against what auto finds, rather than failing here.
  const sandbox = await rt.detectSandbox(request.sandbox === 'none' ? 'none' : 'auto')
  const probeDir = mkdtempSync(join(tmpdir(), 'vnode-doctor-'))
  const layer = await rt.detectRootLayer(sandbox.mode, probeDir).finally(() => rmSync(probeDir, {recursive: true, force: true}))
  // The filesystem walls `up` would settle: the layer by the same trial, the hidden paths wherever there is a sandbox.
  const walls = rt.withFsWalls(rt.nodeWalls(sandbox.mode), sandbox.mode === 'namespaces' ? {...(layer.mode ? {layer: layer.mode} : {}), hide: []} : undefined)
  const cgroups = rt.detectCgroups(request.cgroups)
  const podNetwork = await rt.detectPodNetwork(request.podNetwork === 'off' ? 'off' : 'auto', sandbox.mode === 'namespaces')
  const port = request.port ?? DefaultKubeletPort
  return {
    os: osName(osRelease) ?? process.platform,
    family: osFamily(osRelease),
    uid,
    sandbox: {mode: sandbox.mode, reason: sandbox.reason},
    programs: {bwrap: onPath('bwrap'), nsenter: onPath('nsenter'), iptables: onPath('iptables')},
    walls: rt.wallNames(walls),
    identity: walls.identity,
    layer: sandbox.mode === 'namespaces' ? {ok: Boolean(layer.mode), how: layer.how} : undefined,
    cgroups: {mode: cgroups.mode, reason: cgroups.reason},
    cgroupV2: existsSync('/sys/fs/cgroup/cgroup.controllers'),
    podNetwork,
    cniPath: rt.DefaultCniPath,
    cniMissing: rt.RequiredPlugins.filter((p) => !executable(join(rt.DefaultCniPath, p))),
    port: {port, free: port === 0 || (await portOr(port, '0.0.0.0')) === port},
  }
}
