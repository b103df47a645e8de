import {Command, Flags} from '@oclif/core'
import type {Emulator, EmulatorOptions} from '../emulator/emulator.js'
import {parseDuration} from '../cli/duration.js'
import {kubeFlags} from '../cli/flags.js'
import {UserError} from '../errors.js'

function parseLabel(s: string): [string, string] {
  const i = s.indexOf('=')
  if (i <= 0) throw new UserError(`invalid --label "${s}": expected key=value`)
  return [s.slice(0, i), s.slice(i + 1)]
}

/** key[=value]:Effect, as `kubectl taint` writes it. */
export function parseTaint(s: string): {key: string; value?: string; effect: string} {
  const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(s)
  if (!m) throw new UserError(`invalid --taint "${s}": expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute`)
  return {key: m[1], value: m[2], effect: m[3]}
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
    cgroups: Flags.string({
      description: 'cgroups for pods and containers (limits enforced, usage from the kernel): auto picks v2, then v1, else none (limits not enforced, a Warning per pod)',
      options: ['auto', 'v1', 'v2', 'none'],
      default: 'auto',
    }),
    'pod-max-pids': Flags.integer({description: 'maximum processes per pod (pids.max of the pod cgroup); -1 for no limit', default: -1, min: -1}),
    images: Flags.string({description: 'YAML image map: image names (with * globs) to the program to run for containers without a command; its entries come before the built-in ones'}),
    manifests: Flags.string({description: 'directory of static pod manifests (one Pod per YAML or JSON file) to run, each with a mirror pod'}),
    'no-reregister': Flags.boolean({description: 'do not re-create the Node when it is deleted out of band'}),
    'kube-api-qps': Flags.integer({description: 'API requests per second this node may make; 0 for no limit', default: 50, min: 0}),
    'kube-api-burst': Flags.integer({description: 'API request burst above --kube-api-qps', default: 100, min: 1}),
    'event-qps': Flags.integer({description: 'events per second this node may write, a budget apart from --kube-api-qps; 0 for no limit', default: 50, min: 0}),
    'event-burst': Flags.integer({description: 'event burst above --event-qps', default: 100, min: 1}),
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
        'a network namespace and address per pod from the CNI plugins: auto (as root, with the sandbox, when the API server is not on loopback: in-cluster config must reach it), on, off (the host network)',
      options: ['auto', 'on', 'off'],
      default: 'auto',
    }),
    'no-tui': Flags.boolean({description: 'print one line per change instead of the terminal dashboard'}),
    output: Flags.string({char: 'o', description: 'line output format when not on a terminal', options: ['plain', 'json'], default: 'plain'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Up)
    const requestTimeoutMs = parseDuration('--request-timeout', flags['request-timeout'], {bareSeconds: true})
    const {hostname} = await import('node:os')
    const {resolve} = await import('node:path')
    const {ImageMap} = await import('../emulator/runtime/images.js')
    const {defaultImageMap} = await import('../emulator/runtime/default-images.js')
    // Read the image map before registering, so a bad file fails before the node exists.
    const userImages = flags.images
      ? await ImageMap.load(flags.images).catch((error: Error) => {
          throw new UserError(`invalid --images ${flags.images}: ${error.message}`)
        })
      : undefined
    const images = (userImages ?? new ImageMap()).over(defaultImageMap())
    const {CgroupsLabel, detectCgroups} = await import('../emulator/runtime/cgroups/detect.js')
    const cgroups = detectCgroups(flags.cgroups as 'auto' | 'v1' | 'v2' | 'none')
    if (cgroups.mode === 'none' && flags.cgroups !== 'auto' && flags.cgroups !== 'none') throw new UserError(`--cgroups ${flags.cgroups}: ${cgroups.reason}`)
    const {detectSandbox} = await import('../emulator/runtime/sandbox/detect.js')
    const {SandboxLabel} = await import('../emulator/runtime/sandbox/spec.js')
    const sandbox = await detectSandbox(flags.sandbox as 'auto' | 'namespaces' | 'none').catch((error: Error) => {
      throw new UserError(error.message)
    })
    if (sandbox.mode === 'none' && flags.sandbox === 'auto') process.stderr.write(`sandbox: none (pods run as bare host processes): ${sandbox.reason}\n`)
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
      labels: {[SandboxLabel]: sandbox.mode, [CgroupsLabel]: cgroups.mode, ...Object.fromEntries((flags.label ?? []).map(parseLabel))},
      taints: (flags.taint ?? []).map(parseTaint),
      defaultTaint: !flags['no-default-taint'],
      nodeIP: flags['node-ip'],
      port: flags.port,
      stateDir: flags['state-dir'],
      manifestsDir: flags.manifests === undefined ? undefined : resolve(flags.manifests),
      reregister: !flags['no-reregister'],
      provider: async (ctx) => {
        const {ProcessProvider} = await import('../emulator/runtime/process-provider.js')
        const {clusterDnsFor, podNetworkFor} = await import('../emulator/runtime/network/node-network.js')
        const log = (line: string) => process.stderr.write(`${line}\n`)
        const network = await podNetworkFor(ctx, flags['pod-network'] as 'auto' | 'on' | 'off', sandbox.mode === 'namespaces', log).catch((error: Error) => {
          throw new UserError(error.message)
        })
        // Containers find the user's toolchain (pyenv, nvm, venv, asdf shims) on the PATH `up` was started with.
        return ProcessProvider.create(ctx, {
          images,
          sandbox: sandbox.mode,
          path: process.env.PATH,
          cgroups,
          podPidsLimit: flags['pod-max-pids'],
          network,
          dns: {clusterDNS: await clusterDnsFor(ctx.services)},
        })
      },
      shutdownGraceSeconds: flags['shutdown-grace'],
      qps: flags['kube-api-qps'],
      burst: flags['kube-api-burst'],
      eventQps: flags['event-qps'],
      eventBurst: flags['event-burst'],
      anonymousAuth: flags['anonymous-auth'],
      authorizationMode: flags['authorization-mode'] as 'Webhook' | 'AlwaysAllow',
      clientCaFile: flags['client-ca-file'],
    }
    const {nodeOptions, runNodes} = await import('../cli/up-service.js')
    await runNodes(nodeOptions(base, flags.nodes), {rm: flags.rm, render: (emulators, stop) => this.render(emulators, flags, stop)})
  }

  /**
   * On an interactive terminal (not --no-tui, not -o json, not CI): the Ink
   * dashboard, whose kills go through the API. Otherwise one plain or JSON
   * line per change. Returns the function that detaches the renderer.
   */
  private async render(emulators: Emulator[], flags: {'no-tui': boolean; output: string; kubeconfig?: string; context?: string}, stop: () => void): Promise<() => void> {
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
    return startDashboard(emulator, {nodeName: emulator.opts.name, actions}).unmount
  }
}
