import {readdirSync, readFileSync} from 'node:fs'
import {constants} from 'node:os'

/** How often a process that is not vnode's child (adopted, or the helper's: no exit event) is checked for its end. */
export const DefaultAdoptedPollMs = 500

/** Linux USER_HZ and page size: fixed on every architecture Node supports. */
export const ClockTicksPerSecond = 100
export const PageSize = 4096

const signalNames = new Map<number, NodeJS.Signals>(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]))

/** A signal's name from its number (as a child process's exit names it). */
export function signalName(n: number): NodeJS.Signals | undefined {
  return signalNames.get(n)
}

export interface ProcStat {
  pid: number
  /** The command name (at most 15 bytes; may contain spaces and parentheses). */
  comm: string
  state: string
  ppid: number
  pgrp: number
  utime: number
  stime: number
  cutime: number
  cstime: number
  /** Clock ticks after boot: with the pid, identifies one process across pid reuse. */
  startTime: number
  rssPages: number
}

/** /proc/<pid>/stat, or undefined when the process is gone. */
export function readStat(pid: number): ProcStat | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // comm may contain spaces and parentheses: fields start after the last ')'.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
  const n = (i: number) => Number(f[i - 3])
  return {
    pid,
    comm: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')),
    state: f[0],
    ppid: n(4),
    pgrp: n(5),
    utime: n(14),
    stime: n(15),
    cutime: n(16),
    cstime: n(17),
    startTime: n(22),
    rssPages: n(24),
  }
}

/** The process is alive (not a zombie) and is the one that started at startTicks: a reused pid is another process. */
export function isLiveProcess(pid: number, startTicks: number): boolean {
  const s = readStat(pid)
  return !!s && s.startTime === startTicks && s.state !== 'Z' && s.state !== 'X'
}

/**
 * A process's CPU time in seconds, as precise as /proc allows: the sum of
 * its live threads' run time in nanoseconds (/proc/<pid>/task/<tid>/schedstat),
 * never less than its stat's utime and stime, which also count the threads
 * that ended. The ticks alone are sampled: on some kernels a process that
 * ran tens of milliseconds reads 0 of them.
 */
export function processCpuSeconds(s: ProcStat): number {
  const ticks = (s.utime + s.stime) / ClockTicksPerSecond
  let nanos = 0
  try {
    for (const tid of readdirSync(`/proc/${s.pid}/task`)) {
      try {
        nanos += Number(readFileSync(`/proc/${s.pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) || 0
      } catch {
        // The thread ended since the listing.
      }
    }
  } catch {
    return ticks
  }
  return Math.max(ticks, nanos / 1e9)
}

/** Every live (non-zombie) process below root: its children, theirs, and so on, from one pass over /proc. */
export function descendants(root: number): ProcStat[] {
  const live = new Map<number, ProcStat>()
  for (const d of readdirSync('/proc')) {
    if (d.charCodeAt(0) > 57 || d.charCodeAt(0) < 48) continue
    const s = readStat(Number(d))
    if (s && s.state !== 'Z' && s.state !== 'X') live.set(s.pid, s)
  }
  const out: ProcStat[] = []
  for (const s of live.values()) {
    for (let p = s.ppid; p > 1; p = live.get(p)?.ppid ?? 0) {
      if (p === root) {
        out.push(s)
        break
      }
    }
  }
  return out
}

/** Live (non-zombie) processes of a process group. */
export function groupMembers(pgid: number): ProcStat[] {
  return processGroups(new Set([pgid])).get(pgid) ?? []
}

/**
 * Live (non-zombie) processes of several process groups, from one pass over
 * /proc (which reads every process's stat): per group, a pass each would
 * cost the number of groups times the number of processes.
 */
export function processGroups(pgids: ReadonlySet<number>): Map<number, ProcStat[]> {
  const out = new Map<number, ProcStat[]>()
  if (pgids.size === 0) return out
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return out
  }
  for (const d of entries) {
    if (d.charCodeAt(0) > 57 || d.charCodeAt(0) < 48) continue
    const s = readStat(Number(d))
    if (!s || !pgids.has(s.pgrp) || s.state === 'Z' || s.state === 'X') continue
    const list = out.get(s.pgrp)
    if (list) list.push(s)
    else out.set(s.pgrp, [s])
  }
  return out
}

/**
 * Whether any process of the group is still alive. `kill(-pgid, 0)` is not
 * enough: it succeeds while only zombies are left, which never go away when
 * their parent does not reap them. It answers the common cases without a
 * scan of /proc (which reads every process's stat, and is polled during
 * every termination): no process at all, or a live group leader.
 */
export function isGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
  }
  const leader = readStat(pgid)
  if (leader && leader.pgrp === pgid && leader.state !== 'Z' && leader.state !== 'X') return true
  return groupMembers(pgid).length > 0
}

/** Sends a signal to a whole process group; a group that is gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}
