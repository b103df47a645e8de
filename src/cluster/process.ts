import {readFileSync} from 'node:fs'

/**
 * True while pid is a live process. A zombie counts as gone: kill(pid, 0)
 * still succeeds for it, /proc/<pid>/stat does not lie.
 */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    return state !== 'Z' && state !== 'X'
  } catch {
    return false
  }
}

export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig)
    return true
  } catch {
    return false
  }
}

/** Waits until every pid is gone or the deadline passes; returns the ones still alive. */
export async function waitGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs
  let alive = pids.filter(isAlive)
  while (alive.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50))
    alive = alive.filter(isAlive)
  }
  return alive
}
