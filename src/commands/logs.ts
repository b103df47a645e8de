import {Args, Command, Flags} from '@oclif/core'
import {kubeFlags, namespaceFlag} from '../cli/flags.js'

export default class Logs extends Command {
  static override summary = "Print a pod's container logs (the pod log API, as kubectl logs), a colour per container"
  static override examples = ['kubectl vnode logs web-0', 'kubectl vnode logs web-0 -c nginx -f --tail 20', 'kubectl vnode logs job-x --previous --timestamps', 'kubectl vnode logs web-0 --since 5m']

  static override args = {pod: Args.string({description: 'pod name', required: true})}

  static override flags = {
    ...kubeFlags,
    ...namespaceFlag,
    container: Flags.string({char: 'c', description: 'only this container (default: every container, each line prefixed with its name)'}),
    follow: Flags.boolean({char: 'f', description: 'keep streaming new lines'}),
    previous: Flags.boolean({char: 'p', description: "the previous instance's logs (before the last restart)"}),
    tail: Flags.integer({description: 'only the last N lines (-1: all)', default: -1, min: -1}),
    since: Flags.string({description: 'only lines newer than this, e.g. 10s, 5m, 2h'}),
    timestamps: Flags.boolean({description: 'prefix each line with its RFC3339 timestamp'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Logs)
    const {parseDuration} = await import('../cli/duration.js')
    const sinceSeconds = flags.since === undefined ? undefined : parseDuration('--since', flags.since) / 1000
    const {openSession, isKubeError, kubectlErrorText} = await import('../cli/session.js')
    const session = await openSession(flags)
    const {chooseContainers, readPod, streamPodLogs} = await import('../cli/logs-service.js')
    const {LogLinePrinter} = await import('../ui/log-lines.js')
    const {colorEnabled} = await import('../ui/color.js')
    const abort = new AbortController()
    const onSignal = () => abort.abort()
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    let node: string | undefined
    try {
      const pod = await readPod(session, session.namespace, args.pod)
      node = pod.spec?.nodeName
      const printer = new LogLinePrinter(colorEnabled(process.stdout), chooseContainers(pod, flags.container))
      const opts = {
        namespace: session.namespace,
        pod: args.pod,
        container: flags.container,
        follow: flags.follow,
        previous: flags.previous,
        tailLines: flags.tail,
        sinceSeconds,
        timestamps: flags.timestamps,
        signal: abort.signal,
      }
      await streamPodLogs(session, pod, opts, (container, line, multi) => process.stdout.write(`${printer.format(container, line, multi)}\n`))
    } catch (error) {
      if (!isKubeError(error)) throw error
      process.stderr.write(`${kubectlErrorText(error, session)}\n`)
      const code = (error as {code?: unknown}).code
      if (typeof code === 'number' && code >= 500 && node) {
        // The API server proxies logs to the node's kubelet API: say which node did not answer.
        process.stderr.write(`hint: the API server could not reach the kubelet API of node ${node}; is \`kubectl vnode up\` running for it?\n`)
      }
      this.exit(1)
    } finally {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
  }
}
