import type {ContainerUsage} from '../../provider/usage.js'
import {ClockTicksPerSecond, groupMembers, PageSize, processCpuSeconds, type ProcStat, readStat} from './proc.js'

export type {PodUsage} from '../../provider/usage.js'

/** A container's usage from /proc: the sum over its process group's members (groupMembers, or one processGroups pass for many); CPU from each member's threads (processCpuSeconds). */
export function processGroupUsage(name: string, pgid: number, startTime?: Date, members: ProcStat[] = groupMembers(pgid)): ContainerUsage {
  let cpuSeconds = 0
  let rss = 0
  for (const p of members) {
    cpuSeconds += processCpuSeconds(p)
    rss += p.rssPages
  }
  // Children that ended and were waited for: their time is counted in ticks only.
  const main = readStat(pgid)
  if (main) cpuSeconds += (main.cutime + main.cstime) / ClockTicksPerSecond
  return {
    name,
    cpuSeconds,
    memoryBytes: rss * PageSize,
    pid: members.some((m) => m.pid === pgid) ? pgid : undefined,
    processes: members.length,
    startTime,
  }
}
