import {readdirSync, readFileSync, rmdirSync, writeFileSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import type {ResourceConfig} from './resources.js'
import {refusedWriteMessage} from '../process/command-errors.js'

/** What a cgroup's accounting says, cAdvisor's way. */
export interface CgroupUsage {
  cpuNanoSeconds: number
  memoryUsageBytes: number
  /** usage minus inactive file pages (cAdvisor's working set). */
  workingSetBytes: number
  rssBytes: number
}

/**
 * One cgroup version behind one interface. Paths are relative to the node
 * root; the driver knows where that is in each hierarchy. Methods throw on
 * a kernel refusal (with the file and the errno in the message) except
 * where the comment says otherwise.
 */
export interface CgroupDriver {
  readonly version: 1 | 2
  /** The node root's directories (one per v1 hierarchy, one for v2). */
  readonly rootDirs: string[]
  /**
   * Makes the cgroup and any missing parent, each ready to hold processes (v1 cpuset copied, v2 controllers enabled).
   * True when it was made now (in every hierarchy): it holds the kernel's defaults.
   */
  create(path: string): boolean
  /** Writes the config; `fresh` (a cgroup create() just made): a value the kernel gives a new cgroup is not written again. */
  apply(path: string, config: ResourceConfig, opts?: {oomGroup?: boolean; fresh?: boolean}): void
  /**
   * Moves a process (and its threads) into the cgroup. Asynchronous: moving a process waits on the kernel's cgroup
   * locks (once per v1 hierarchy), which must not hold up the event loop of a node starting many pods at once.
   */
  place(path: string, pid: number): Promise<void>
  /** The cgroup.procs files a process writes its pid to to join the cgroup (one per v1 hierarchy). */
  procsFiles(path: string): string[]
  /** Processes in the cgroup and below it (every hierarchy, for v1); empty when it is gone. */
  procs(path: string): number[]
  /** Whether the pid is in this cgroup (or below it). */
  contains(path: string, pid: number): boolean
  /** OOM kills the kernel counted in the cgroup (v1 memory.oom_control oom_kill, v2 memory.events oom_kill); 0 when unknown. */
  oomKills(path: string): number
  usage(path: string): CgroupUsage | undefined
  /** Stops every process of the cgroup from running (freezer), so a kill loop cannot race forks; false when it cannot. */
  freeze(path: string, frozen: boolean): boolean
  /** Kills every process at once when the kernel can (v2 cgroup.kill); false otherwise. */
  killAll(path: string): boolean
  /** Removes the cgroup and the cgroups below it (they must hold no process); missing is not an error. */
  remove(path: string): void
  /** Child cgroup names. */
  children(path: string): string[]
  exists(path: string): boolean
}

export function writeCg(dir: string, file: string, value: string | number): void {
  try {
    writeFileSync(join(dir, file), String(value))
  } catch (error) {
    throw writeCgError(dir, file, value, error)
  }
}

/** writeCg on the thread pool (the event loop goes on meanwhile). */
export async function writeCgAsync(dir: string, file: string, value: string | number): Promise<void> {
  try {
    await writeFile(join(dir, file), String(value))
  } catch (error) {
    throw writeCgError(dir, file, value, error)
  }
}

/** A refused cgroup write: the file, the value and the errno; the kernel's error as the cause. */
function writeCgError(dir: string, file: string, value: string | number, error: unknown): Error {
  const e = error as NodeJS.ErrnoException
  return new Error(refusedWriteMessage(join(dir, file), value, e.code ?? e.message), {cause: error})
}

export function readCg(dir: string, file: string): string | undefined {
  try {
    return readFileSync(join(dir, file), 'utf8')
  } catch {
    return undefined
  }
}

/** `key value` lines (memory.stat, cpu.stat, memory.events, memory.oom_control). */
export function readKeyed(dir: string, file: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of (readCg(dir, file) ?? '').split('\n')) {
    const [k, v] = line.split(' ')
    if (k && v !== undefined) out.set(k, Number(v))
  }
  return out
}

export function readPids(dir: string, file = 'cgroup.procs'): number[] {
  return (readCg(dir, file) ?? '')
    .split('\n')
    .filter((l) => l !== '')
    .map(Number)
}

export function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir, {withFileTypes: true})
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
  } catch {
    return []
  }
}

/** Processes of a cgroup and its descendants. */
export function treePids(dir: string): number[] {
  const out = readPids(dir)
  for (const d of subdirs(dir)) out.push(...treePids(join(dir, d)))
  return out
}

/** rmdir bottom-up; a missing directory is fine, a busy one throws. */
export function removeCgroupTree(dir: string): void {
  for (const d of subdirs(dir)) removeCgroupTree(join(dir, d))
  try {
    rmdirSync(dir)
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (e.code !== 'ENOENT') throw new Error(`cannot remove cgroup ${dir}: ${e.code ?? e.message}`, {cause: error})
  }
}

/** cAdvisor: working set = usage - inactive_file, never below zero. */
export function workingSet(usage: number, inactiveFile: number): number {
  return inactiveFile < usage ? usage - inactiveFile : 0
}
