import {Command, Flags} from '@oclif/core'
import type {Emulator, EmulatorOptions} from '../emulator/emulator.js'
import type {ProviderFactory} from '../emulator/provider/handler.js'
import type {SandboxWalls} from '../emulator/runtime/host.js'
import {parseDuration} from '../cli/duration.js'
import {kubeFlags} from '../cli/flags.js'
import {UserError} from '../errors.js'
import type {NodeNotes} from '../ui/node-notes.js'

/** key=value, for the flag named (its error names it). */
function parseLabel(flag: string): (s: string) => [string, string] {
  return (s) => {
    const i = s.indexOf('=')
    if (i <= 0) throw new UserError(`invalid ${flag} "${s}": expected key=value`)
    return [s.slice(0, i), s.slice(i + 1)]
  }
}

/** key[=value]:Effect, as `kubectl taint` writes it. */
export function parseTaint(s: string): {key: string; value?: string; effect: string} {
  const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(s)
  if (!m) throw new UserError(`invalid --taint "${s}": expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute`)
  return {key: m[1], value: m[2], effect: m[3]}
}

/** --sandbox-pool FLOOR:CAP; undefined: the runtime's defaults. */
export function parsePoolSize(s: string | undefined): {floor: number; cap: number} | undefined {
  if (s === undefined) return undefined
  const m = /^(\d+):(\d+)$/.exec(s)
  if (!m || Number(m[1]) > Number(m[2])) throw new UserError(`invalid --sandbox-pool "${s}": expected FLOOR:CAP with FLOOR <= CAP, e.g. 1:16 (0:0 for none)`)
  return {floor: Number(m[1]), cap: Number(m[2])}
}

/**
 * --crash-loop-backoff INITIAL:MAX, a restarting container's back-off (container/crash-loop.ts): the first delay and
 * the cap it doubles up to. The kubelet's are 10s:5m; its ReduceDefaultCrashLoopBackOffDecay feature gives 1s:1m.
 */
export function parseCrashLoopBackoff(s: string): {initialMs: number; maxMs: number} {
  const usage = `invalid --crash-loop-backoff "${s}": expected INITIAL:MAX, two durations with 0 < INITIAL <= MAX, e.g. 10s:5m (the kubelet's) or 1s:1m`
  const parts = s.split(':')
  if (parts.length !== 2) throw new UserError(usage)
  let initialMs: number
  let maxMs: number
  try {
    ;[initialMs, maxMs] = parts.map((p) => parseDuration('--crash-loop-backoff', p))
  } catch {
    throw new UserError(usage)
  }
  if (!(initialMs > 0) || initialMs > maxMs) throw new UserError(usage)
  return {initialMs, maxMs}
}

export default class Up extends Command {
  static override summary = 'Register a node with the current cluster and run its pods as local processes'
  static override examples = ['kubectl vnode up', 'kubectl vnode up --name dev-laptop --label team=web --no-tui', 'kubectl vnode up --context kind-kind --cpu 4 --memory 8Gi --rm']

  static override flags = {
    name: Flags.string({description: 'node name (default: vnode-<hostname>)'}),
    ...kubeFlags,
    cpu: Flags.string({description: 'CPU capacity to report (default: host cores)'}),
    memory: Flags.string({description: 'memory capacity to report, e.g. 8Gi (default: host memory)'}),
    pods: Flags.integer({description: 'maximum pods on this node', default: 110, min: 1}),
    label: Flags.string({description: 'extra node label key=value (repeatable)', multiple: true}),
    taint: Flags.string({description: 'extra node taint key[=value]:Effect (repeatable)', multiple: true}),
    'no-default-taint': Flags.boolean({description: 'do not add the virtual-kubelet.io/provider=vnode:NoSchedule taint'}),
    'node-ip': Flags.string({description: 'InternalIP to report (default: the address the API server can reach)'}),
    port: Flags.integer({description: 'kubelet API port; 0 for any free port; a port given here must be free (default: 10250, or a free one when taken)', min: 0, max: 65535}),
    'state-dir': Flags.string({description: 'directory for pod sandboxes, logs and records'}),
    hide: Flags.string({description: 'a host path no container sees, beside the default credential locations (repeatable; docs/SECURITY.md)', multiple: true}),
    'fs-walls': Flags.string({
      description: "the sandbox's writable layer per container and its hidden paths; off: no layer (the host read-only) and only the state dir hidden, to measure what they cost",
      options: ['on', 'off'],
      default: 'on',
      hidden: true,
    }),
    expose: Flags.string({description: 'a default hidden location containers see after all, e.g. ~/.docker (repeatable; state dirs stay hidden)', multiple: true}),
    cgroups: Flags.string({
      description: 'cgroups for pods and containers (limits enforced, usage from the kernel): auto picks v2, then v1, else none (limits not enforced, a Warning per pod)',
      options: ['auto', 'v1', 'v2', 'none'],
      default: 'auto',
    }),
    'pod-max-pids': Flags.integer({description: 'maximum processes per pod (pids.max of the pod cgroup); -1 for no limit', default: -1, min: -1}),
    images: Flags.string({description: 'YAML image map: image names (with * globs) to the program to run for containers without a command; its entries come before the built-in ones'}),
    manifests: Flags.string({description: 'directory of static pod manifests (one Pod per YAML or JSON file) to run, each with a mirror pod'}),
    'virtual-kubelet-events': Flags.boolean({
      description: "also record virtual-kubelet's event reasons (MandatoryConfigMapNotFound, OptionalSecretNotFound, ...) where virtual-kubelet records them, beside the kubelet's",
    }),
    'no-reregister': Flags.boolean({description: 'do not re-create the Node when it is deleted out of band'}),
    'kube-api-qps': Flags.integer({description: 'API requests per second this node may make; 0 for no limit', default: 50, min: 0}),
    'kube-api-burst': Flags.integer({description: 'API request burst above --kube-api-qps', default: 100, min: 1}),
    'event-qps': Flags.integer({description: 'events per second this node may write, a budget apart from --kube-api-qps; 0 for no limit', default: 50, min: 0}),
    'event-burst': Flags.integer({description: 'event burst above --event-qps', default: 100, min: 1}),
    'crash-loop-backoff': Flags.string({
      description: "a restarting container's back-off as INITIAL:MAX, its first delay and the cap it doubles up to: the kubelet's 10s:5m, or e.g. 1s:1m for a quicker loop while developing",
      default: '10s:5m',
    }),
    'shutdown-grace': Flags.integer({description: 'seconds the pods get to terminate when vnode stops', default: 30, min: 0}),
    nodes: Flags.integer({description: 'run N nodes in this process, named <name>-0 .. <name>-N-1, each with its own lease, status and port', default: 1, min: 1}),
    rm: Flags.boolean({description: 'on exit, delete the Node and its Lease instead of cordoning it'}),
    'anonymous-auth': Flags.boolean({description: 'kubelet API: serve unauthenticated requests as system:anonymous (still authorized)', default: false}),
    'authorization-mode': Flags.string({description: 'kubelet API: how requests are authorized', options: ['Webhook', 'AlwaysAllow'], default: 'Webhook'}),
    'client-ca-file': Flags.string({description: 'kubelet API: CA bundle for client certificates (default: the kubeconfig cluster CA)'}),
    sandbox: Flags.string({
      description: 'what pods run inside: auto (namespaces where the host allows them, else none), namespaces (a pod sandbox: mount, PID and UTS namespaces), none (bare host processes)',
      options: ['auto', 'namespaces', 'none'],
      default: 'auto',
    }),
    'pod-network': Flags.string({
      description:
        'a network namespace and address per pod from the CNI plugins: auto (as root, with the sandbox, when the API server is not on loopback: in-cluster config must reach it; `cluster up` as root gives it an address pods reach), on, off (the host network)',
      options: ['auto', 'on', 'off'],
      default: 'auto',
    }),
    'sandbox-pool': Flags.string({
      description:
        'the warm pool of pod network sandboxes (a namespace, its veth and an address, made ahead of pod starts), as FLOOR:CAP: it holds as many as the largest burst of starts of the last 10 minutes, between the two, and never the addresses --pods needs; 0:0 for none (default: 1:128, the cap as the pod CIDR allows, said at start)',
    }),
    'allowed-namespaces': Flags.string({
      description:
        "namespaces whose pods may run here, comma-separated, or * for all; a pod from another fails admission (default: every namespace on the local control plane of `kubectl vnode cluster up`, else the kubeconfig context's namespace)",
    }),
    relay: Flags.string({
      description:
        "where the API server reaches this node's kubelet API (logs, exec, port-forward, metrics): auto (checked after registration: direct when the API server reaches this host, else a relay pod in the cluster), on, off",
      options: ['auto', 'on', 'off'],
      default: 'auto',
    }),
    'serving-cert': Flags.string({
      description:
        "the kubelet API's serving certificate: auto (a kubernetes.io/kubelet-serving CSR for the node's addresses, approved with your own rights where RBAC allows; self-signed, said in one line, when the cluster has not issued it within 5 s), csr (cluster-signed, or `up` fails after 60 s), self-signed",
      options: ['auto', 'csr', 'self-signed'],
      default: 'auto',
    }),
    'relay-namespace': Flags.string({description: 'namespace of the relay pod and its ConfigMap (created when missing)', default: 'vnode-system'}),
    'relay-image': Flags.string({description: 'image of the relay pod: any image with python3 (3.8+) on its PATH', default: 'python:3-alpine'}),
    'relay-port': Flags.integer({description: "the relay's kubelet port, published as the node's", default: 10250, min: 1, max: 65535}),
    'relay-tunnel-port': Flags.integer({description: "the relay's tunnel port, on the relay pod's loopback", default: 10251, min: 1, max: 65535, hidden: true}),
    'relay-node-selector': Flags.string({description: 'a node label key=value the relay pod must run on (repeatable)', multiple: true}),
    'no-tui': Flags.boolean({description: 'print one line per change instead of the terminal dashboard'}),
    output: Flags.string({char: 'o', description: 'line output format when not on a terminal', options: ['plain', 'json'], default: 'plain'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Up)
    const requestTimeoutMs = parseDuration('--request-timeout', flags['request-timeout'], {bareSeconds: true})
    const {hostname} = await import('node:os')
    const {resolve} = await import('node:path')
    const {ImageMap, defaultImageMap, detectCgroups, detectSandbox, detectPodNetwork, clusterDnsFor, podNetworkFor, podNetworkSummary, sandboxWalls} = await import('../emulator/runtime/host.js')
    const {CgroupsLabel, PodNetworkAnnotation, SandboxLabel} = await import('../common/labels.js')
    // Read the image map before registering, so a bad file fails before the node exists.
    const userImages = flags.images
      ? await ImageMap.load(flags.images).catch((error: Error) => {
          throw new UserError(`invalid --images ${flags.images}: ${error.message}`)
        })
      : undefined
    const images = (userImages ?? new ImageMap()).over(defaultImageMap())
    const cgroups = detectCgroups(flags.cgroups as 'auto' | 'v1' | 'v2' | 'none')
    if (cgroups.mode === 'none' && flags.cgroups !== 'auto' && flags.cgroups !== 'none') throw new UserError(`--cgroups ${flags.cgroups}: ${cgroups.reason}`)
    const sandbox = await detectSandbox(flags.sandbox as 'auto' | 'namespaces' | 'none').catch((error: Error) => {
      throw new UserError(error.message)
    })
    if (sandbox.mode === 'none' && flags.sandbox === 'auto') process.stderr.write(`sandbox: none (pods run as bare host processes): ${sandbox.reason}\n`)
    for (const [flag, paths] of [
      ['--hide', flags.hide],
      ['--expose', flags.expose],
    ] as const) {
      for (const p of paths ?? []) if (!p.startsWith('/') && p !== '~' && !p.startsWith('~/')) throw new UserError(`invalid ${flag} ${p}: must be an absolute path or start with ~/`)
    }
    const {nodeWalls, wallNames, withFsWalls} = await import('../emulator/runtime/host.js')
    const {AllowedNamespacesAnnotation, WallsAnnotation} = await import('../common/labels.js')
    const {modeLine} = await import('../kubectl/doctor-report.js')
    const podNetworkFlag = flags['pod-network'] as 'auto' | 'on' | 'off'
    const sandboxPool = parsePoolSize(flags['sandbox-pool'])
    const crashLoop = parseCrashLoopBackoff(flags['crash-loop-backoff'])
    const {loadKubeConfig} = await import('../emulator/kube/client.js')
    const {EventReason} = await import('../emulator/kube/event-reasons.js')
    const server = (await loadKubeConfig({kubeconfig: flags.kubeconfig, context: flags.context}).catch(() => undefined))?.getCurrentCluster()?.server
    // Said on the Node (the dashboard, `pods -o wide`): the same answer podNetworkFor acts on.
    const podNetworkDetection = await detectPodNetwork(podNetworkFlag, sandbox.mode === 'namespaces', undefined, server).catch((error: Error) => {
      throw new UserError(error.message)
    })
    const podNetwork = podNetworkSummary(podNetworkDetection)
    const {NodeNotes} = await import('../ui/node-notes.js')
    const notes = new NodeNotes()
    const {allowedNamespaces} = await import('../cli/allowed-namespaces.js')
    const allowed = await allowedNamespaces(flags['allowed-namespaces'], {kubeconfig: flags.kubeconfig, context: flags.context})
    const base: EmulatorOptions = {
      name:
        flags.name ??
        `vnode-${hostname()
          .toLowerCase()
          .replace(/[^a-z0-9.-]/g, '-')}`,
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      requestTimeoutMs,
      cpu: flags.cpu,
      memory: flags.memory,
      pods: flags.pods,
      labels: {[SandboxLabel]: sandbox.mode, [CgroupsLabel]: cgroups.mode, ...Object.fromEntries((flags.label ?? []).map(parseLabel('--label')))},
      annotations: {[PodNetworkAnnotation]: podNetwork, [AllowedNamespacesAnnotation]: allowed.namespaces?.join(',') ?? '*'},
      allowedNamespaces: allowed.namespaces,
      taints: (flags.taint ?? []).map(parseTaint),
      defaultTaint: !flags['no-default-taint'],
      nodeIP: flags['node-ip'],
      port: flags.port,
      stateDir: flags['state-dir'],
      manifestsDir: flags.manifests === undefined ? undefined : resolve(flags.manifests),
      virtualKubeletEvents: flags['virtual-kubelet-events'],
      reregister: !flags['no-reregister'],
      shutdownGraceSeconds: flags['shutdown-grace'],
      qps: flags['kube-api-qps'],
      burst: flags['kube-api-burst'],
      eventQps: flags['event-qps'],
      eventBurst: flags['event-burst'],
      anonymousAuth: flags['anonymous-auth'],
      authorizationMode: flags['authorization-mode'] as 'Webhook' | 'AlwaysAllow',
      clientCaFile: flags['client-ca-file'],
      servingCert: flags['serving-cert'] as 'auto' | 'csr' | 'self-signed',
      relay: {
        mode: flags.relay as 'auto' | 'on' | 'off',
        namespace: flags['relay-namespace'],
        image: flags['relay-image'],
        port: flags['relay-port'],
        tunnelPort: flags['relay-tunnel-port'],
        nodeSelector: Object.fromEntries((flags['relay-node-selector'] ?? []).map(parseLabel('--relay-node-selector'))),
      },
    }
    const log = (line: string) => notes.write(line)
    /** The node's provider, with the filesystem walls settled for its state dir and the names of all its walls. */
    const provider =
      (walls: SandboxWalls | undefined, wallNameList: string[]): ProviderFactory =>
      async (ctx) => {
        const {ProcessProvider} = await import('../emulator/runtime/process-provider.js')
        // Said once the node is registered, so input that fails earlier prints only its error.
        log(`allowed namespaces: ${allowed.why}`)
        const network = await podNetworkFor(ctx, podNetworkFlag, sandbox.mode === 'namespaces', log, {...sandboxPool, maxPods: flags.pods}).catch((error: Error) => {
          throw new UserError(error.message)
        })
        // The line `kubectl vnode doctor` ends with: the mode, its walls.
        log(modeLine({sandbox: sandbox.mode, walls: wallNameList, cgroups: cgroups.mode, podNetwork: network ? 'on' : 'off'}))
        // Containers find the user's toolchain (pyenv, nvm, venv, asdf shims) on the PATH `up` was started with.
        return ProcessProvider.create(ctx, {
          images,
          sandbox: sandbox.mode,
          walls,
          path: process.env.PATH,
          cgroups,
          podPidsLimit: flags['pod-max-pids'],
          crashLoop,
          network,
          hostNetworkReason: network ? undefined : (podNetworkDetection.reason ?? 'the pod network could not be set up'),
          log,
          dns: {
            clusterDNS: await clusterDnsFor(ctx.services, ctx.kc, (message) => {
              log(`cluster DNS: ${message}`)
              void ctx.recorder.record({kind: 'Node', apiVersion: 'v1', name: ctx.nodeName, uid: ctx.nodeName}, 'Warning', EventReason.ClusterDnsUnavailable, message)
            }),
          },
        })
      }
    const {nodeOptions, runNodes} = await import('../cli/up-service.js')
    const {defaultStateDir, validateNodeName} = await import('../emulator/emulator-config.js')
    const nodes: EmulatorOptions[] = []
    for (const o of nodeOptions(base, flags.nodes)) {
      // A name the emulator would refuse makes no state dir.
      validateNodeName(o.name)
      // Settled before the node registers, in its own state dir (the emulator's rule), where the writable layer's
      // trial overlay is made: whether it has a layer and hidden paths is in its walls annotation from the start.
      const walls = await sandboxWalls({
        sandbox: flags['fs-walls'] === 'off' ? 'none' : sandbox.mode,
        stateDir: o.stateDir ?? defaultStateDir(o.name),
        kubeconfig: flags.kubeconfig,
        hide: flags.hide,
        expose: flags.expose,
        path: process.env.PATH,
        log,
      })
      const names = wallNames(withFsWalls(nodeWalls(sandbox.mode), walls))
      nodes.push({...o, annotations: {...o.annotations, [WallsAnnotation]: names.join(',')}, provider: provider(walls, names)})
    }
    await runNodes(nodes, {rm: flags.rm, render: (emulators, stop) => this.render(emulators, flags, stop, notes)})
  }

  /**
   * On an interactive terminal (not --no-tui, not -o json, not CI): the Ink
   * dashboard, whose kills go through the API. Otherwise one plain or JSON
   * line per change. Returns the function that detaches the renderer.
   */
  private async render(emulators: Emulator[], flags: {'no-tui': boolean; output: string; kubeconfig?: string; context?: string}, stop: () => void, notes: NodeNotes): Promise<() => void> {
    const {isInteractive} = await import('../ui/terminal.js')
    // The dashboard shows one node; several nodes print lines, each labelled with its node.
    if (flags['no-tui'] || flags.output === 'json' || !isInteractive() || emulators.length > 1) {
      const {attachPlainRenderer} = await import('../ui/plain.js')
      const detach = emulators.map((e) => attachPlainRenderer(e, flags.output as 'plain' | 'json', process.stdout, emulators.length > 1 ? e.opts.name : undefined))
      return () => detach.forEach((d) => d())
    }
    const [emulator] = emulators
    const {startDashboard} = await import('../ui/dashboard/start.js')
    const {podActions} = await import('../cli/pod-actions.js')
    const actions = {...podActions({kubeconfig: flags.kubeconfig, context: flags.context}), quit: stop}
    const dashboard = startDashboard(emulator, {nodeName: emulator.opts.name, actions})
    const undivert = notes.divert((line) => dashboard.store.note(line))
    return () => {
      undivert()
      dashboard.unmount()
    }
  }
}
