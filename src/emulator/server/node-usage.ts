import {readFileSync} from 'node:fs'

/** The node's own CPU and memory, from /proc (what cAdvisor reports for the root cgroup). */
export interface NodeUsage {
  /** Cumulative busy CPU time of all cores, in nanoseconds. */
  cpuNanoSeconds: number
  memoryTotalBytes: number
  memoryUsageBytes: number
  memoryWorkingSetBytes: number
  memoryRssBytes: number
  pageFaults: number
  majorPageFaults: number
  bootTime: Date
}

/** USER_HZ: the unit of /proc/stat, 100 on every Linux architecture Node runs on. */
export const ClockTicksPerSecond = 100

function read(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

/** Busy jiffies from the first line of /proc/stat: user nice system idle iowait irq softirq steal ... */
export function parseProcStat(text: string): {busyTicks: number; bootTime?: Date} {
  const cpu = /^cpu\s+(.*)$/m.exec(text)?.[1].trim().split(/\s+/).map(Number) ?? []
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = cpu
  const btime = Number(/^btime\s+(\d+)/m.exec(text)?.[1])
  return {busyTicks: user + nice + system + irq + softirq + steal, bootTime: btime ? new Date(btime * 1000) : undefined}
}

export function parseMeminfo(text: string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/^([^:\s]+):\s+(\d+)(?: kB)?$/gm)) out[m[1]] = Number(m[2]) * (m[0].endsWith('kB') ? 1024 : 1)
  return out
}

export function readNodeUsage(): NodeUsage {
  const stat = parseProcStat(read('/proc/stat'))
  const mem = parseMeminfo(read('/proc/meminfo'))
  const vmstat = Object.fromEntries([...read('/proc/vmstat').matchAll(/^(\w+) (\d+)$/gm)].map((m) => [m[1], Number(m[2])]))
  const total = mem.MemTotal ?? 0
  const usage = Math.max(0, total - (mem.MemFree ?? 0))
  // cAdvisor's working set: usage minus inactive file pages (reclaimable cache).
  const workingSet = Math.max(0, usage - (mem['Inactive(file)'] ?? 0))
  return {
    cpuNanoSeconds: stat.busyTicks * (1e9 / ClockTicksPerSecond),
    memoryTotalBytes: total,
    memoryUsageBytes: usage,
    memoryWorkingSetBytes: workingSet,
    memoryRssBytes: mem.AnonPages ?? 0,
    pageFaults: vmstat.pgfault ?? 0,
    majorPageFaults: vmstat.pgmajfault ?? 0,
    bootTime: stat.bootTime ?? new Date(0),
  }
}
