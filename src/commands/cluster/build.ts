import {Command, Flags} from '@oclif/core'

export default class ClusterBuild extends Command {
  static override summary = 'Build etcd and the Kubernetes control plane binaries from the Go module proxy into the cache'
  static override flags = {
    'out-dir': Flags.string({description: 'where to put the binaries (default: the build cache)'}),
    force: Flags.boolean({description: 'rebuild binaries that are already cached'}),
    services: Flags.boolean({description: 'also build kube-proxy, metrics-server and CoreDNS', default: true, allowNo: true}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(ClusterBuild)
    const {buildControlPlane} = await import('../../cluster/build.js')
    const dir = await buildControlPlane({
      outDir: flags['out-dir'],
      force: flags.force,
      log: (line) => process.stderr.write(`${line}\n`),
    })
    if (flags.services) {
      const {buildClusterServices} = await import('../../cluster/services/build.js')
      await buildClusterServices({force: flags.force, log: (line) => process.stderr.write(`${line}\n`)})
    }
    process.stdout.write(`${dir}\n`)
  }
}
