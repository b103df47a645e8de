import {ClockTicksPerSecond, groupMembers, PageSize, readStat} from './proc.js'

export interface ContainerUsage {
  name: string
  /** CPU time of the container's live processes, plus what its main process reaped. */
  cpuSeconds: number
  /** Resident memory of the container's live processes. */
  memoryBytes: number
  pids: number
}

export interface PodUsage {
  namespace: string
  name: string
  uid: string
  containers: ContainerUsage[]
}

/** A container's usage from /proc: the sum over its process group. */
export function processGroupUsage(name: string, pgid: number): ContainerUsage {
  const members = groupMembers(pgid)
  let ticks = 0
  let rss = 0
  for (const p of members) {
    ticks += p.utime + p.stime
    rss += p.rssPages
  }
  const main = readStat(pgid)
  if (main) ticks += main.cutime + main.cstime
  return {name, cpuSeconds: ticks / ClockTicksPerSecond, memoryBytes: rss * PageSize, pids: members.length}
}
