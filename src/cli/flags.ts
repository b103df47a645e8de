import {Flags} from '@oclif/core'

/**
 * The standard kube flags every command takes (a subset of kubectl's
 * genericclioptions.ConfigFlags). Kept free of heavy imports: commands load
 * the client only inside run().
 */
export const kubeFlags = {
  kubeconfig: Flags.string({description: 'path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)', helpGroup: 'KUBE'}),
  context: Flags.string({description: 'kubeconfig context to use', helpGroup: 'KUBE'}),
  'request-timeout': Flags.string({
    description: 'how long to wait for one API request before giving up, e.g. 5s, 1m; 0 waits forever',
    default: '0',
    helpGroup: 'KUBE',
  }),
}

export const namespaceFlag = {
  namespace: Flags.string({char: 'n', description: 'namespace (default: the context namespace, then "default")', helpGroup: 'KUBE'}),
}

export interface KubeFlagValues {
  kubeconfig?: string
  context?: string
  namespace?: string
  'request-timeout': string
}
