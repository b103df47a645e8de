import {existsSync, mkdirSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {type CgroupDriver, type CgroupUsage, readCg, readKeyed, removeCgroupTree, subdirs, treePids, workingSet, writeCg, writeCgAsync} from './driver.js'
import {NoLimit, type ResourceConfig, sharesToWeight} from './resources.js'

export const RequiredV2Controllers = ['cpu', 'memory', 'pids'] as const

/**
 * cgroup v2: one tree. Every cgroup vnode makes enables the controllers for
 * its children (processes live only in the leaves, the container cgroups).
 */
export class CgroupV2 implements CgroupDriver {
  readonly version = 2
  readonly rootDirs: string[]

  constructor(private readonly root: string) {
    this.rootDirs = [root]
  }

  private dir(path: string): string {
    return join(this.root, path)
  }

  create(path: string): boolean {
    return this.createDir(this.dir(path))
  }

  private createDir(dir: string): boolean {
    if (existsSync(dir)) return false
    const parent = dirname(dir)
    if (!existsSync(parent)) this.createDir(parent)
    enableControllers(parent)
    mkdirSync(dir)
    return true
  }

  /** Every value is written, `fresh` or not. */
  apply(path: string, c: ResourceConfig, opts: {oomGroup?: boolean; fresh?: boolean} = {}): void {
    const d = this.dir(path)
    if (c.cpuShares !== undefined) writeCg(d, 'cpu.weight', sharesToWeight(c.cpuShares))
    if (c.cpuQuota !== undefined || c.cpuPeriod !== undefined) {
      const quota = c.cpuQuota === undefined || c.cpuQuota === NoLimit ? 'max' : c.cpuQuota
      writeCg(d, 'cpu.max', `${quota} ${c.cpuPeriod ?? 100_000}`)
    }
    if (c.memoryLimit !== undefined) {
      writeCg(d, 'memory.max', c.memoryLimit === NoLimit ? 'max' : c.memoryLimit)
      // No swap past the limit (NoSwap), where the kernel accounts swap.
      if (readCg(d, 'memory.swap.max') !== undefined) writeCg(d, 'memory.swap.max', c.memoryLimit === NoLimit ? 'max' : 0)
    }
    if (c.pidsLimit !== undefined) writeCg(d, 'pids.max', c.pidsLimit === NoLimit ? 'max' : c.pidsLimit)
    // The kubelet's default (singleProcessOOMKill false): an OOM kills the whole container.
    if (opts.oomGroup && readCg(d, 'memory.oom.group') !== undefined) writeCg(d, 'memory.oom.group', 1)
  }

  place(path: string, pid: number): Promise<void> {
    return writeCgAsync(this.dir(path), 'cgroup.procs', pid)
  }

  procsFiles(path: string): string[] {
    return [join(this.dir(path), 'cgroup.procs')]
  }

  procs(path: string): number[] {
    return treePids(this.dir(path))
  }

  contains(path: string, pid: number): boolean {
    return treePids(this.dir(path)).includes(pid)
  }

  oomKills(path: string): number {
    return readKeyed(this.dir(path), 'memory.events').get('oom_kill') ?? 0
  }

  usage(path: string): CgroupUsage | undefined {
    const d = this.dir(path)
    const cpu = readKeyed(d, 'cpu.stat').get('usage_usec')
    const current = readCg(d, 'memory.current')
    if (cpu === undefined || current === undefined) return undefined
    const stat = readKeyed(d, 'memory.stat')
    const bytes = Number(current)
    return {cpuNanoSeconds: cpu * 1000, memoryUsageBytes: bytes, workingSetBytes: workingSet(bytes, stat.get('inactive_file') ?? 0), rssBytes: stat.get('anon') ?? 0}
  }

  freeze(path: string, frozen: boolean): boolean {
    const d = this.dir(path)
    if (readCg(d, 'cgroup.freeze') === undefined) return false
    try {
      writeCg(d, 'cgroup.freeze', frozen ? 1 : 0)
      return true
    } catch {
      return false
    }
  }

  killAll(path: string): boolean {
    const d = this.dir(path)
    if (readCg(d, 'cgroup.kill') === undefined && !existsSync(join(d, 'cgroup.kill'))) return false
    try {
      writeCg(d, 'cgroup.kill', 1)
      return true
    } catch {
      return false
    }
  }

  remove(path: string): void {
    removeCgroupTree(this.dir(path))
  }

  children(path: string): string[] {
    return subdirs(this.dir(path))
  }

  exists(path: string): boolean {
    return existsSync(this.dir(path))
  }
}

/** Enables cpu, memory and pids for a cgroup's children (those already on are left as they are). */
export function enableControllers(dir: string): void {
  const on = new Set((readCg(dir, 'cgroup.subtree_control') ?? '').trim().split(/\s+/))
  const missing = RequiredV2Controllers.filter((c) => !on.has(c))
  if (missing.length) writeCg(dir, 'cgroup.subtree_control', missing.map((c) => `+${c}`).join(' '))
}
