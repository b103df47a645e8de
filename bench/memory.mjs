// What a node's runtime holds in memory: the sum over its processes of the
// resident set (RSS, as `ps` shows it, shared pages counted in each process)
// and of the proportional set (PSS: shared pages split between the processes
// that map them, so a hundred shims of one binary count its text once).
// The pods' own programs are not the runtime's and are left out on every node.
import {readFileSync} from 'node:fs'
import {descendants} from '../dist/emulator/runtime/process/proc.js'
import {HelperName} from '../dist/emulator/runtime/process/helper-runner.js'

function read(path) {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

/** kB lines of /proc/<pid>/smaps_rollup (Rss, Pss), in bytes; zero for a process gone meanwhile. */
function rollup(pid) {
  const text = read(`/proc/${pid}/smaps_rollup`)
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024
  return {rssBytes: kb('Rss'), pssBytes: kb('Pss')}
}

/** Summed RSS and PSS of the given pids, with how many processes they are. */
export function memoryOf(pids) {
  let rssBytes = 0
  let pssBytes = 0
  for (const pid of new Set(pids)) {
    const m = rollup(pid)
    rssBytes += m.rssBytes
    pssBytes += m.pssBytes
  }
  return {rssBytes, pssBytes, processes: new Set(pids).size}
}

/** The node's helper (process/helper-runner.ts): a perl whose last argument is its name (a pod's own perl is not it). */
function isHelper(p) {
  return p.comm === 'perl' && read(`/proc/${p.pid}/cmdline`).split('\0').filter(Boolean).at(-1) === HelperName
}

/**
 * The pids of a vnode's runtime: the node process, its helper (which starts the containers without stdin and holds
 * them as their parent) and its sandbox monitors (bwrap, one per sandboxed container).
 */
export function vnodeRuntimePids(pid) {
  return [
    pid,
    ...descendants(pid)
      .filter((p) => p.comm === 'bwrap' || isHelper(p))
      .map((p) => p.pid),
  ]
}
