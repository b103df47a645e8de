import type {ContainerUsage} from '../../provider/usage.js'
import {ClockTicksPerSecond, groupMembers, PageSize, type ProcStat, readStat} from './proc.js'

export type {PodUsage} from '../../provider/usage.js'

/** A container's usage from /proc: the sum over its process group's members (groupMembers, or one processGroups pass for many). */
export function processGroupUsage(name: string, pgid: number, startTime?: Date, members: ProcStat[] = groupMembers(pgid)): ContainerUsage {
  let ticks = 0
  let rss = 0
  for (const p of members) {
    ticks += p.utime + p.stime
    rss += p.rssPages
  }
  const main = readStat(pgid)
  if (main) ticks += main.cutime + main.cstime
  return {
    name,
    cpuSeconds: ticks / ClockTicksPerSecond,
    memoryBytes: rss * PageSize,
    pid: members.some((m) => m.pid === pgid) ? pgid : undefined,
    processes: members.length,
    startTime,
  }
}
