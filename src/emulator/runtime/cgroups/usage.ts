import type {ContainerUsage} from '../../provider/usage.js'
import {readStat} from '../process/proc.js'
import type {NodeCgroups} from './node-cgroups.js'

/**
 * A container's usage from its cgroup's accounting: CPU in nanoseconds
 * (so an idle process reads its real, small, non-zero time), memory as
 * cAdvisor's working set (usage minus inactive file), every process of the
 * cgroup counted, escaped ones included.
 */
export function cgroupUsage(cg: NodeCgroups, name: string, path: string, mainPid: number, startTime: Date): ContainerUsage {
  const u = cg.usage(path)
  const procs = cg.procs(path)
  const main = readStat(mainPid)
  return {
    name,
    cpuSeconds: (u?.cpuNanoSeconds ?? 0) / 1e9,
    memoryBytes: u?.workingSetBytes ?? 0,
    memoryUsageBytes: u?.memoryUsageBytes,
    memoryRssBytes: u?.rssBytes,
    pid: main && main.state !== 'Z' ? mainPid : undefined,
    processes: procs.length,
    startTime,
  }
}
