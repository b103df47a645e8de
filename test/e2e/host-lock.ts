import {mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'

/**
 * Test files run in parallel, each with its own namespace, node names,
 * state dirs and ports. A few also read or make state of the whole host
 * that another of them would see: network namespaces, bridges and veths,
 * iptables rules, cgroup trees, a cluster of their own with the pod
 * network, a firewall rule on a port. Those take this lock of the run's, so
 * only one of them runs at a time (beside files that touch none of it).
 *
 * The lock is a directory under the run's dir (mkdir is atomic), naming its
 * holder's pid; a holder that died (its jest worker gone) leaves a lock the
 * next one takes over. It is held per process and counted, so a file with
 * two such describe blocks takes it once.
 */

/** The longest such file runs about two minutes; several may be queued ahead. */
export const HostLockWaitMs = 20 * 60_000
const PollMs = 250

let held = 0

const lockDir = () => join(process.env[E2eEnv.dir]!, 'host.lock')
const ownerFile = () => join(lockDir(), 'owner')

function ownerPid(): number | undefined {
  try {
    return Number(readFileSync(ownerFile(), 'utf8')) || undefined
  } catch {
    return undefined
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function tryTake(): boolean {
  try {
    mkdirSync(lockDir())
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    const owner = ownerPid()
    // Its holder died while holding it (or between mkdir and writing its pid: then it is read again next poll).
    if (owner === undefined || alive(owner)) return false
    rmSync(lockDir(), {recursive: true, force: true})
    return false
  }
  writeFileSync(ownerFile(), String(process.pid))
  return true
}

export async function acquireHostLock(waitMs = HostLockWaitMs): Promise<void> {
  if (held > 0) {
    held++
    return
  }
  const deadline = Date.now() + waitMs
  while (!tryTake()) {
    if (Date.now() > deadline) throw new Error(`the host lock ${lockDir()} is still held by pid ${ownerPid() ?? 'unknown'} after ${waitMs} ms`)
    await new Promise((r) => setTimeout(r, PollMs))
  }
  held = 1
}

export function releaseHostLock(): void {
  if (held === 0) return
  held--
  if (held === 0 && ownerPid() === process.pid) rmSync(lockDir(), {recursive: true, force: true})
}
