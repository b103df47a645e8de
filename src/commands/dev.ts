import {Args, Command, Flags} from '@oclif/core'
import {kubeFlags, namespaceFlag} from '../cli/flags.js'
import {UserError} from '../errors.js'

/** The signals that end dev: each one still deletes the pod and restores the workload. */
const StopSignals: Array<[NodeJS.Signals, string]> = [
  ['SIGINT', 'interrupted'],
  ['SIGTERM', 'terminated'],
  ['SIGHUP', 'the terminal closed'],
]

export default class Dev extends Command {
  static override summary = 'Run the code you are editing as a pod of a workload, on a vnode node, restarted on each save'
  static override description =
    "Creates a pod from the workload's pod template (its labels, env, ConfigMaps, Secrets, volumes, service account and sidecars) whose container runs " +
    'COMMAND in the current directory, on a vnode node: one more replica behind its Services, or with --replace the only one. ' +
    'A saved file restarts the container through the node (a Killing event, restartCount + 1); the log streams here; ' +
    'Ctrl-C deletes the pod and restores the workload. A Job, or a pod with restartPolicy Never, ends dev with its exit code.'

  static override examples = [
    'kubectl vnode dev deploy/web -- python3 server.py',
    'kubectl vnode dev deploy/web -c app --port 9229:9229 -- node --inspect-brk=0.0.0.0:9229 server.js',
    'kubectl vnode dev deploy/worker --replace -- go run ./cmd/worker',
    'kubectl vnode dev job/migrate --no-watch -- ./migrate.sh',
    'kubectl vnode dev --restore deploy/worker',
  ]

  static override strict = false
  static override args = {workload: Args.string({description: 'deploy/NAME, statefulset/NAME, job/NAME, pod/NAME or a pod name', required: false})}

  static override flags = {
    ...kubeFlags,
    ...namespaceFlag,
    container: Flags.string({char: 'c', description: 'the container that runs COMMAND (required when the template has several)'}),
    node: Flags.string({description: 'the vnode node to run on (default: the only Ready vnode node)'}),
    replace: Flags.boolean({description: 'scale the Deployment or StatefulSet to 0 while dev runs, so the dev pod is the only one; restored at the end'}),
    restore: Flags.boolean({description: 'undo what a killed dev left: delete its dev pods of WORKLOAD and restore the scale --replace saved'}),
    watch: Flags.boolean({description: 'restart the container when a watched file changes', default: true, allowNo: true}),
    'watch-path': Flags.string({description: 'a directory or glob to watch (repeatable; default: the current directory)', multiple: true}),
    ignore: Flags.string({description: "a glob of files whose changes restart nothing (repeatable; .git, node_modules, caches and the repository's ignore files always)", multiple: true}),
    port: Flags.string({description: 'forward LOCAL:POD from 127.0.0.1 to the dev pod while dev runs (repeatable), e.g. 9229:9229 for a debugger', multiple: true}),
    probes: Flags.boolean({description: "keep the container's readiness probe (--no-probes drops it; liveness and startup probes are always dropped)", default: true, allowNo: true}),
  }

  async run(): Promise<void> {
    // Everything after -- is the command, its flags included: only what comes before is dev's to parse.
    const dashes = this.argv.indexOf('--')
    const command = dashes >= 0 ? this.argv.slice(dashes + 1) : []
    const {args, argv, flags} = await this.parse(Dev, dashes >= 0 ? this.argv.slice(0, dashes) : [...this.argv])
    if (!args.workload) throw new UserError('give the workload: kubectl vnode dev deploy/NAME -- COMMAND [ARGS...] (see kubectl vnode dev --help)')
    if ((argv as string[]).length > 1) throw new UserError(`the command goes after --, e.g. kubectl vnode dev ${args.workload} -- ${(argv as string[]).slice(1).join(' ')}`)
    if (!flags.restore && command.length === 0) throw new UserError(`missing the command to run: kubectl vnode dev ${args.workload} -- COMMAND [ARGS...]`)
    if (flags.restore && (command.length > 0 || flags.replace)) throw new UserError('--restore takes only the workload (no command, no --replace)')
    const {parseWorkloadRef} = await import('../cli/dev/workload.js')
    const {parsePortMapping} = await import('../cli/dev/port-forward.js')
    const ref = parseWorkloadRef(args.workload)
    const ports = (flags.port ?? []).map(parsePortMapping)
    const {openSession, failWithKubeError} = await import('../cli/session.js')
    const session = await openSession(flags)
    const {runDev, runRestore} = await import('../cli/dev/dev-service.js')
    const {devLine} = await import('../ui/dev-output.js')
    const {colorEnabled} = await import('../ui/color.js')
    const color = colorEnabled(process.stderr)
    const emit = (p: Parameters<typeof devLine>[0]) => {
      const line = devLine(p, color)
      if (line) (line.stream === 'out' ? process.stdout : process.stderr).write(`${line.text}\n`)
    }
    const stop = new AbortController()
    const handlers = StopSignals.map(([signal, why]) => {
      const handler = () => {
        // A second Ctrl-C does not skip the clean-up: leaving the workload at zero is worse than waiting for it.
        if (stop.signal.aborted) return emit({kind: 'warning', message: 'already stopping: the pod is being deleted and the workload restored'})
        emit({kind: 'stopping', why})
        stop.abort()
      }
      process.on(signal, handler)
      return () => process.off(signal, handler)
    })
    let code = 0
    try {
      if (flags.restore) code = await runRestore(session, session.namespace, ref, emit)
      else {
        const opts = {namespace: session.namespace, workload: ref, container: flags.container, command, cwd: process.cwd(), node: flags.node, replace: flags.replace}
        code = await runDev(session, {...opts, watch: flags.watch, watchPaths: flags['watch-path'] ?? [], ignore: flags.ignore ?? [], ports, probes: flags.probes, signal: stop.signal}, emit)
      }
    } catch (error) {
      failWithKubeError(error, session)
    } finally {
      for (const off of handlers) off()
    }
    if (code !== 0) this.exit(code)
  }
}
