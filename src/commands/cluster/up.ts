import {Command, Flags} from '@oclif/core'
import {defaultClusterDir} from '../../cluster/paths.js'

export default class ClusterUp extends Command {
  static override summary = 'Start a local control plane (etcd, kube-apiserver, scheduler, controller-manager) on loopback'
  static override description = 'Binaries are taken from --bin-dir, then $KUBEBUILDER_ASSETS, then the build cache of `npm run controlplane:build`, then PATH.'
  static override examples = [
    'kubectl vnode cluster up',
    'kubectl vnode cluster up --dir /tmp/c1 --bin-dir ~/envtest/bin',
    'kubectl vnode cluster up --apiserver-arg=--watch-cache=false --apiserver-arg=--etcd-compaction-interval=5s',
  ]
  static override flags = {
    dir: Flags.string({description: 'directory for certificates, kubeconfig, data and logs', default: defaultClusterDir()}),
    'bin-dir': Flags.string({description: 'directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl'}),
    port: Flags.integer({description: 'API server port; 0 for any free port (default: 6443 when free, otherwise any free port)', min: 0, max: 65535}),
    'node-monitor-grace-period': Flags.string({description: 'how long the node lifecycle controller waits for a silent node, e.g. 40s'}),
    'apiserver-arg': Flags.string({
      description: "an extra kube-apiserver flag, appended after vnode's own, e.g. --apiserver-arg=--watch-cache=false (repeatable)",
      multiple: true,
    }),
    loopback: Flags.boolean({
      description: 'keep the API server on 127.0.0.1 (as without root): no address or device of its own, so its nodes keep pods on the host network',
      default: false,
    }),
    services: Flags.boolean({
      description: 'also run kube-proxy (as root), metrics-server and CoreDNS, built by `kubectl vnode cluster build`',
      default: true,
      allowNo: true,
    }),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(ClusterUp)
    const {startCluster} = await import('../../cluster/controlplane.js')
    const state = await startCluster({
      dir: flags.dir,
      binDir: flags['bin-dir'],
      port: flags.port,
      nodeMonitorGracePeriod: flags['node-monitor-grace-period'],
      apiserverArgs: flags['apiserver-arg'],
      services: flags.services,
      loopback: flags.loopback,
      log: (line) => process.stderr.write(`${line}\n`),
    })
    process.stdout.write(`control plane ready at ${state.server}\nexport KUBECONFIG=${state.kubeconfig}\n`)
  }
}
