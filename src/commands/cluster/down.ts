import {Command, Flags} from '@oclif/core'
import {defaultClusterDir} from '../../cluster/paths.js'

export default class ClusterDown extends Command {
  static override summary = 'Stop the local control plane and leave no process behind'
  static override flags = {
    dir: Flags.string({description: 'directory the control plane was started in', default: defaultClusterDir()}),
    purge: Flags.boolean({description: 'also delete the directory (data, certificates, kubeconfig)'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(ClusterDown)
    const {stopCluster} = await import('../../cluster/controlplane.js')
    const stopped = await stopCluster(flags.dir)
    if (flags.purge) {
      const {rm} = await import('node:fs/promises')
      await rm(flags.dir, {recursive: true, force: true})
    }
    const running = stopped.filter((c) => c.running).map((c) => c.name)
    process.stdout.write(running.length > 0 ? `stopped ${running.join(', ')}\n` : 'control plane not running\n')
  }
}
