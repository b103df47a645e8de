import type {ContainerUsage} from '../../provider/usage.js'
import {ClockTicksPerSecond, groupMembers, PageSize, processCpuSeconds, type ProcStat, readStat} from './proc.js'

export type {PodUsage} from '../../provider/usage.js'

/**
 * The most CPU each instance has been reported with, by the instance: a cumulative figure never goes back, though the
 * live threads it sums lose one that ends (its time then counts in the ticks only). Weak: gone with the instance.
 */
const cpuReported = new WeakMap<object, number>()

/**
 * A container's usage from /proc: the sum over its process group's members (groupMembers, or one processGroups pass
 * for many); CPU from each member's threads (processCpuSeconds), never less than the instance (`instance`) was
 * reported with before.
 */
export function processGroupUsage(name: string, pgid: number, startTime?: Date, members: ProcStat[] = groupMembers(pgid), instance?: object): ContainerUsage {
  let cpuSeconds = 0
  let rss = 0
  for (const p of members) {
    cpuSeconds += processCpuSeconds(p)
    rss += p.rssPages
  }
  // Children that ended and were waited for: their time is counted in ticks only.
  const main = readStat(pgid)
  if (main) cpuSeconds += (main.cutime + main.cstime) / ClockTicksPerSecond
  if (instance) {
    cpuSeconds = Math.max(cpuSeconds, cpuReported.get(instance) ?? 0)
    cpuReported.set(instance, cpuSeconds)
  }
  return {
    name,
    cpuSeconds,
    memoryBytes: rss * PageSize,
    pid: members.some((m) => m.pid === pgid) ? pgid : undefined,
    processes: members.length,
    startTime,
  }
}
