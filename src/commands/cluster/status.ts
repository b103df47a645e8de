import {Command, Flags} from '@oclif/core'
import {defaultClusterDir} from '../../cluster/paths.js'

export default class ClusterStatus extends Command {
  static override summary = 'Report whether the local control plane is running'
  static override flags = {
    dir: Flags.string({description: 'directory the control plane was started in', default: defaultClusterDir()}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(ClusterStatus)
    const {componentStatuses, readState} = await import('../../cluster/controlplane.js')
    const state = await readState(flags.dir)
    if (!state) {
      process.stdout.write(`control plane not running (no state in ${flags.dir})\n`)
      process.exitCode = 1
      return
    }
    const statuses = componentStatuses(state)
    for (const c of statuses) process.stdout.write(`${c.name.padEnd(24)} ${c.running ? `running (pid ${c.pid})` : 'stopped'}\n`)
    process.stdout.write(`server      ${state.server}\nkubeconfig  ${state.kubeconfig}\n`)
    if (!statuses.every((c) => c.running)) process.exitCode = 1
  }
}
