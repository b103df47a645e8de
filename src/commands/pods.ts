import {Command, Flags} from '@oclif/core'
import {kubeFlags, namespaceFlag} from '../cli/flags.js'
import {UserError} from '../errors.js'
import type {PodsFormat} from '../ui/pods-output.js'

const Formats = ['wide', 'json', 'yaml', 'name'] as const

export default class Pods extends Command {
  static override summary = 'List the pods of vnode nodes (kubectl get pods, limited to nodes run by vnode)'
  static override examples = ['kubectl vnode pods', 'kubectl vnode pods -A -o wide', 'kubectl vnode pods --node dev-laptop -l app=web -w', 'kubectl vnode pods -n shop -o yaml']

  static override flags = {
    ...kubeFlags,
    ...namespaceFlag,
    'all-namespaces': Flags.boolean({char: 'A', description: 'list pods in all namespaces'}),
    selector: Flags.string({char: 'l', description: 'label selector, e.g. app=web,tier!=db'}),
    node: Flags.string({description: 'only this node (default: every node labelled vnode.dev/node=true)'}),
    output: Flags.string({char: 'o', description: `output format: ${Formats.join('|')}`}),
    watch: Flags.boolean({char: 'w', description: 'after listing, watch for changes (a live table on a terminal, appended rows otherwise)'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Pods)
    const output = flags.output ?? 'table'
    if (output !== 'table' && !(Formats as readonly string[]).includes(output)) {
      throw new UserError(`unable to match a printer suitable for the output format "${output}", allowed formats are: ${Formats.join(',')}`)
    }
    const {openSession, failWithKubeError, kubectlErrorText} = await import('../cli/session.js')
    const session = await openSession(flags)
    const {attachPids, listVnodePods} = await import('../cli/pods-service.js')
    const render = await import('../ui/pods-output.js')
    const query = {namespace: flags['all-namespaces'] ? undefined : session.namespace, labelSelector: flags.selector, node: flags.node}
    try {
      const list = await listVnodePods(session, query)
      if (output === 'wide') await attachPids(session, list.pods, list.nodes)
      const opts = {output: output as PodsFormat, allNamespaces: flags['all-namespaces'], namespace: session.namespace}
      if (!flags.watch) {
        await render.printPods(list.pods, opts)
        return
      }
      const {watchVnodePods} = await import('../cli/pods-service.js')
      const live = render.liveTableWanted(output as PodsFormat)
      const start = (onEvent: Parameters<typeof watchVnodePods>[3]) => watchVnodePods(session, query, list, onEvent, (e) => process.stderr.write(`${kubectlErrorText(e, session)}\n`))
      await (live ? render.runLivePodTable : render.runPodWatchLines)(list.pods, opts, start)
    } catch (error) {
      failWithKubeError(error, session)
    }
  }
}
