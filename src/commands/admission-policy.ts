import {Args, Command, Flags} from '@oclif/core'
import {kubeFlags} from '../cli/flags.js'
import {UserError} from '../errors.js'

export default class AdmissionPolicy extends Command {
  static override summary = 'Let only the users and service accounts named create pods on a node (a ValidatingAdmissionPolicy the API server enforces)'
  static override description =
    'Installs a ValidatingAdmissionPolicy and binding, owned by the Node (removed with it), that deny creating a pod bound to the node or tolerating its taints, ' +
    'and adding ephemeral containers to one, unless the request comes from a name given with --allow or from you. ' +
    'Pods of workloads are created by their controllers: name those service accounts too (e.g. system:serviceaccount:kube-system:replicaset-controller) to let workloads run there.'

  static override examples = [
    'kubectl vnode admission-policy vnode-laptop --allow alice@example.com',
    'kubectl vnode admission-policy vnode-laptop --allow system:serviceaccount:ci:deployer --allow system:serviceaccount:kube-system:replicaset-controller',
    'kubectl vnode admission-policy vnode-laptop --remove',
  ]

  static override args = {node: Args.string({description: 'the node (as `up --name` named it)', required: true})}
  static override flags = {
    ...kubeFlags,
    allow: Flags.string({description: 'a user or service account (system:serviceaccount:NS:NAME) that may create pods on the node (repeatable, or comma-separated)', multiple: true}),
    remove: Flags.boolean({description: 'remove the policy and its binding'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(AdmissionPolicy)
    const {openSession, failWithKubeError} = await import('../cli/session.js')
    const session = await openSession(flags)
    const {installAdmissionPolicy, removeAdmissionPolicy, admissionPolicyName} = await import('../cli/admission-policy.js')
    try {
      if (flags.remove) {
        if (flags.allow?.length) throw new UserError('--remove takes no --allow')
        const removed = await removeAdmissionPolicy(session, args.node)
        this.log(removed ? `removed ${admissionPolicyName(args.node)}` : `no admission policy for node ${args.node}`)
        return
      }
      const allowed = (flags.allow ?? [])
        .flatMap((a) => a.split(','))
        .map((a) => a.trim())
        .filter(Boolean)
      const users = await installAdmissionPolicy(session, args.node, allowed)
      this.log(`validatingadmissionpolicy/${admissionPolicyName(args.node)}: pods on node ${args.node} may only be created by ${users.join(', ')}`)
    } catch (error) {
      if (error instanceof UserError) throw error
      failWithKubeError(error, session)
    }
  }
}
