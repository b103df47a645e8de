import {Args, Command, Flags} from '@oclif/core'
import {kubeFlags, namespaceFlag} from '../cli/flags.js'
import {UserError} from '../errors.js'

export default class Kill extends Command {
  static override summary = 'Terminate pods gracefully through the API (the node stops their processes) and show it happen'
  static override description =
    'Deletes each pod as kubectl delete does; the node running it signals its processes, waits up to the grace period, ' +
    'reports each container exit and removes the object. With --wait (the default) the progress is shown per pod until the object is gone.'

  static override examples = ['kubectl vnode kill web-0', 'kubectl vnode kill -n shop -l app=cart --grace-period 5', 'kubectl vnode kill stuck-pod --force', 'kubectl vnode kill web-0 web-1 --no-wait']

  static override strict = false
  static override args = {pods: Args.string({description: 'pod names', required: false})}

  static override flags = {
    ...kubeFlags,
    ...namespaceFlag,
    selector: Flags.string({char: 'l', description: 'kill the pods matching this label selector'}),
    'grace-period': Flags.integer({description: "seconds the processes get to exit after SIGTERM (default: the pod's terminationGracePeriodSeconds)", min: 0}),
    force: Flags.boolean({description: 'grace period 0: the object is removed at once and the node kills the processes'}),
    wait: Flags.boolean({description: 'wait until each pod is gone, showing its progress', default: true, allowNo: true}),
    timeout: Flags.string({description: 'give up waiting after this long and exit 1, e.g. 30s, 2m (default: grace period + 30s)'}),
  }

  async run(): Promise<void> {
    const {argv, flags} = await this.parse(Kill)
    const names = argv as string[]
    if (names.length === 0 && !flags.selector) throw new UserError('give pod names or a label selector (-l); see kubectl vnode kill --help')
    if (names.length > 0 && flags.selector) throw new UserError('pod names cannot be given together with a selector (-l)')
    if (flags.force && flags['grace-period'] !== undefined && flags['grace-period'] > 0) {
      throw new UserError(`--force means --grace-period 0; it cannot be used with --grace-period ${flags['grace-period']}`)
    }
    const {parseDuration} = await import('../cli/duration.js')
    const timeoutMs = flags.timeout === undefined ? undefined : parseDuration('--timeout', flags.timeout)
    const {openSession, failWithKubeError, kubectlErrorText} = await import('../cli/session.js')
    const session = await openSession(flags)
    const {killPods, resolveSelector} = await import('../cli/kill-service.js')
    const {killProgressLine} = await import('../ui/kill-progress.js')
    const {colorEnabled} = await import('../ui/color.js')
    let targets = names.map((name) => ({namespace: session.namespace, name}))
    try {
      if (flags.selector) {
        targets = await resolveSelector(session, session.namespace, flags.selector)
        if (targets.length === 0) {
          process.stderr.write(`No resources found in ${session.namespace} namespace.\n`)
          return
        }
      }
    } catch (error) {
      failWithKubeError(error, session)
    }
    const gracePeriodSeconds = flags.force ? 0 : flags['grace-period']
    if (gracePeriodSeconds === 0) {
      process.stderr.write('Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.\n')
    }
    const abort = new AbortController()
    const onSignal = () => abort.abort()
    process.once('SIGINT', onSignal)
    const color = colorEnabled(process.stdout)
    try {
      const {failures} = await killPods(session, targets, {gracePeriodSeconds, wait: flags.wait, timeoutMs, signal: abort.signal}, (p) => {
        const line = killProgressLine(p, {color, describe: (e) => kubectlErrorText(e, session)})
        if (line) (line.stream === 'err' ? process.stderr : process.stdout).write(`${line.text}\n`)
      })
      if (failures > 0 || abort.signal.aborted) this.exit(1)
    } finally {
      process.off('SIGINT', onSignal)
    }
  }
}
