import {existsSync, mkdirSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {type CgroupDriver, type CgroupUsage, readCg, readKeyed, removeCgroupTree, subdirs, treePids, workingSet, writeCg, writeCgAsync} from './driver.js'
import {NoLimit, type ResourceConfig} from './resources.js'

/** The v1 controllers a pod cgroup needs, and those used when present. */
export const RequiredV1Controllers = ['cpu', 'cpuacct', 'memory', 'pids'] as const
export const OptionalV1Controllers = ['cpuset', 'freezer'] as const
export type V1Controller = (typeof RequiredV1Controllers)[number] | (typeof OptionalV1Controllers)[number]

/** What the kernel gives a new v1 cgroup (cpu.shares, cpu.cfs_period_us and cfs_quota_us, no memory or pids limit). */
export const V1Defaults = {cpuShares: 1024, cpuPeriod: 100_000, cpuQuota: NoLimit, memoryLimit: NoLimit, pidsLimit: NoLimit} as const

/**
 * cgroup v1: one hierarchy per controller (or a few controllers mounted
 * together), each with the node root at the same relative path. A process
 * is placed in every hierarchy.
 */
export class CgroupV1 implements CgroupDriver {
  readonly version = 1
  readonly rootDirs: string[]

  /** `roots`: the node root's directory in each controller's hierarchy. */
  constructor(private readonly roots: ReadonlyMap<V1Controller, string>) {
    this.rootDirs = [...new Set(roots.values())]
  }

  private dir(controller: V1Controller, path: string): string | undefined {
    const root = this.roots.get(controller)
    return root === undefined ? undefined : join(root, path)
  }

  private all(path: string): string[] {
    return this.rootDirs.map((r) => join(r, path))
  }

  create(path: string): boolean {
    const cpuset = this.roots.get('cpuset')
    let made = true
    for (const root of this.rootDirs) {
      const dir = join(root, path)
      if (root === cpuset) made = this.createCpusetDir(root, dir) && made
      else made = mkdirSync(dir, {recursive: true}) === dir && made
    }
    return made
  }

  /** A cpuset cgroup: the node root copies the host's cpus and mems, one below it has them from the kernel (cpusetInherited). */
  private createCpusetDir(root: string, dir: string): boolean {
    if (dir === root) {
      const made = this.createCpuset(root)
      this.cpusetInherited(root)
      return made
    }
    return this.cpusetInherited(root) ? mkdirSync(dir, {recursive: true}) === dir : this.createCpuset(dir)
  }

  /**
   * Whether a cpuset cgroup made below the node root gets its parent's cpus and mems from the kernel: the node root's
   * `cgroup.clone_children`, set once the root has its own (copied from the host's), and inherited by every cgroup made
   * below it. Each level would otherwise read its parent's two files and write them (seven calls per cgroup made).
   */
  private cpusetInherited(root: string): boolean {
    const known = this.cloning.get(root)
    if (known !== undefined) return known
    if (!existsSync(root)) this.createCpuset(root)
    let cloning = true
    try {
      writeCg(root, 'cgroup.clone_children', 1)
    } catch {
      cloning = false
    }
    this.cloning.set(root, cloning)
    return cloning
  }

  /** Whether the kernel fills in the cpus and mems of the cpuset cgroups below each node root (cpusetInherited). */
  private readonly cloning = new Map<string, boolean>()

  /** A new cpuset cgroup has no cpus and mems: each level copies its parent's before it can hold a process. True when made now. */
  private createCpuset(dir: string): boolean {
    if (existsSync(dir)) return false
    const parent = dirname(dir)
    if (!existsSync(parent)) this.createCpuset(parent)
    mkdirSync(dir)
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      if ((readCg(dir, f) ?? '').trim() === '') writeCg(dir, f, (readCg(parent, f) ?? '').trim())
    }
    return true
  }

  apply(path: string, c: ResourceConfig, opts: {fresh?: boolean} = {}): void {
    // A cgroup made now holds the kernel's defaults (V1Defaults): writing one again is three calls for nothing.
    const set = <K extends keyof typeof V1Defaults>(key: K): boolean => c[key] !== undefined && !(opts.fresh && c[key] === V1Defaults[key])
    const cpu = this.dir('cpu', path)
    if (cpu) {
      if (set('cpuShares')) writeCg(cpu, 'cpu.shares', c.cpuShares!)
      if (set('cpuPeriod')) writeCg(cpu, 'cpu.cfs_period_us', c.cpuPeriod!)
      if (set('cpuQuota')) writeCg(cpu, 'cpu.cfs_quota_us', c.cpuQuota!)
    }
    const mem = this.dir('memory', path)
    if (mem && set('memoryLimit')) setMemoryLimit(mem, c.memoryLimit!)
    const pids = this.dir('pids', path)
    if (pids && set('pidsLimit')) writeCg(pids, 'pids.max', c.pidsLimit === NoLimit ? 'max' : c.pidsLimit!)
  }

  /** One hierarchy after the other: each write holds the kernel's lock of the process's cgroups, so at once they would only queue there. */
  async place(path: string, pid: number): Promise<void> {
    for (const d of this.all(path)) await writeCgAsync(d, 'cgroup.procs', pid)
  }

  procsFiles(path: string): string[] {
    return this.all(path).map((d) => join(d, 'cgroup.procs'))
  }

  procs(path: string): number[] {
    return [...new Set(this.all(path).flatMap((d) => treePids(d)))]
  }

  contains(path: string, pid: number): boolean {
    const d = this.dir('memory', path)
    return !!d && treePids(d).includes(pid)
  }

  oomKills(path: string): number {
    const d = this.dir('memory', path)
    return (d && readKeyed(d, 'memory.oom_control').get('oom_kill')) || 0
  }

  usage(path: string): CgroupUsage | undefined {
    const acct = this.dir('cpuacct', path)
    const mem = this.dir('memory', path)
    const cpu = acct && readCg(acct, 'cpuacct.usage')
    const usage = mem && readCg(mem, 'memory.usage_in_bytes')
    if (cpu === undefined || usage === undefined || cpu === '' || usage === '') return undefined
    const stat = readKeyed(mem!, 'memory.stat')
    const bytes = Number(usage)
    return {
      cpuNanoSeconds: Number(cpu),
      memoryUsageBytes: bytes,
      workingSetBytes: workingSet(bytes, stat.get('total_inactive_file') ?? 0),
      rssBytes: stat.get('total_rss') ?? 0,
    }
  }

  freeze(path: string, frozen: boolean): boolean {
    const d = this.dir('freezer', path)
    if (!d || !existsSync(d)) return false
    try {
      writeCg(d, 'freezer.state', frozen ? 'FROZEN' : 'THAWED')
      return true
    } catch {
      return false
    }
  }

  killAll(): boolean {
    return false
  }

  remove(path: string): void {
    for (const d of this.all(path)) removeCgroupTree(d)
  }

  children(path: string): string[] {
    return [...new Set(this.all(path).flatMap((d) => subdirs(d)))]
  }

  exists(path: string): boolean {
    return this.all(path).some((d) => existsSync(d))
  }
}

/**
 * memory.limit_in_bytes, and memory.memsw.limit_in_bytes (memory + swap) to
 * the same value where the kernel has it, so a limited container cannot
 * swap its way past its limit (the kubelet's NoSwap). memsw must stay at
 * or above the memory limit: raising, memsw goes first.
 */
function setMemoryLimit(dir: string, limit: number): void {
  const hasSwap = readCg(dir, 'memory.memsw.limit_in_bytes') !== undefined
  if (!hasSwap) return writeCg(dir, 'memory.limit_in_bytes', limit)
  try {
    writeCg(dir, 'memory.limit_in_bytes', limit)
    writeCg(dir, 'memory.memsw.limit_in_bytes', limit)
  } catch {
    writeCg(dir, 'memory.memsw.limit_in_bytes', limit)
    writeCg(dir, 'memory.limit_in_bytes', limit)
  }
}
