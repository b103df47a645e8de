import {existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {basename, join} from 'node:path'
import {E2eEnv, MachineFirstEnv} from './env.mjs'

/**
 * Test files run in parallel, each with its own namespace, node names,
 * state dirs and ports. Locks of the run's order the few that cannot:
 *
 * - the host locks, one per kind of host-wide state (HostResource): a file
 *   that reads or makes such state that another such file would see runs
 *   only when no other file holding the same lock does, beside files that
 *   touch none of it;
 * - the machine lock: a file whose load would starve the files beside it
 *   (a thousand pods) runs alone. Every other file holds the machine lock
 *   shared; the exclusive holder waits until the shared holders are gone,
 *   and no new one starts while it waits or runs.
 *
 * The files that have the machine to themselves run first (sequencer.mjs):
 * a shared holder also waits until each of them has released it, so no file
 * that jest starts beside one takes its share first and keeps it waiting.
 *
 * Each lock is a directory under the run's dir (mkdir is atomic) naming its
 * holder's pid; a shared holder is a file named by its pid. A holder that
 * died (its jest worker gone) leaves a lock the next one takes over. Locks
 * are held per process and counted, so a file with two describe blocks
 * takes each once.
 */

/** The longest file runs a few minutes; several may be queued ahead. */
export const LockWaitMs = 30 * 60_000
const PollMs = 250

const runDir = () => process.env[E2eEnv.dir]!
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** An exclusive lock: a directory naming its holder. */
class DirLock {
  private held = 0
  constructor(private readonly name: string) {}

  private get dir(): string {
    return join(runDir(), this.name)
  }

  owner(): number | undefined {
    try {
      return Number(readFileSync(join(this.dir, 'owner'), 'utf8')) || undefined
    } catch {
      return undefined
    }
  }

  /** Held by a live process other than this one. */
  heldElsewhere(): boolean {
    if (!existsSync(this.dir)) return false
    const owner = this.owner()
    // Between its mkdir and its pid: held.
    return owner === undefined || (owner !== process.pid && alive(owner))
  }

  private tryTake(): boolean {
    try {
      mkdirSync(this.dir)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const owner = this.owner()
      // Its holder died while holding it (or between mkdir and writing its pid: then it is read again next poll).
      if (owner !== undefined && !alive(owner)) rmSync(this.dir, {recursive: true, force: true})
      return false
    }
    writeFileSync(join(this.dir, 'owner'), String(process.pid))
    return true
  }

  async acquire(waitMs: number): Promise<void> {
    if (this.held > 0) {
      this.held++
      return
    }
    const deadline = Date.now() + waitMs
    while (!this.tryTake()) {
      if (Date.now() > deadline) throw new Error(`the lock ${this.dir} is still held by pid ${this.owner() ?? 'unknown'} after ${waitMs} ms`)
      await sleep(PollMs)
    }
    this.held = 1
  }

  release(): void {
    if (this.held === 0) return
    this.held--
    if (this.held === 0 && this.owner() === process.pid) rmSync(this.dir, {recursive: true, force: true})
  }
}

/**
 * The kinds of host-wide state a file may hold to itself:
 * - network: network namespaces, bridges and veths, iptables rules, a
 *   cluster of its own with the pod network or kube-proxy, a firewall rule;
 * - cgroups: the host's cgroup trees read whole, memory pushed to an OOM kill;
 * - kubelet-port: the default kubelet port 10250, held or expected free.
 * A file holding several takes them in this order, so two never wait on each other.
 */
export const HostResources = ['network', 'cgroups', 'kubelet-port'] as const
export type HostResource = (typeof HostResources)[number]

const hostLocks = new Map<HostResource, DirLock>(HostResources.map((r) => [r, new DirLock(`host-${r}.lock`)]))
const machineLock = new DirLock('machine.lock')
let sharedHeld = 0
const sharedDir = () => join(runDir(), 'machine.shared')
const sharedFile = () => join(sharedDir(), String(process.pid))

/** The live shared holders other than this process (a dead one's file is removed). */
function otherSharedHolders(): number[] {
  const pids = existsSync(sharedDir()) ? readdirSync(sharedDir()).map(Number) : []
  return pids.filter((pid) => {
    if (pid === process.pid) return false
    if (alive(pid)) return true
    rmSync(join(sharedDir(), String(pid)), {force: true})
    return false
  })
}

/** The host locks of these resources, in HostResources' order. */
export async function acquireHostLocks(resources: readonly HostResource[], waitMs = LockWaitMs): Promise<void> {
  for (const r of HostResources) if (resources.includes(r)) await hostLocks.get(r)!.acquire(waitMs)
}

export function releaseHostLocks(resources: readonly HostResource[]): void {
  for (const r of [...HostResources].reverse()) if (resources.includes(r)) hostLocks.get(r)!.release()
}

const doneDir = () => join(runDir(), 'machine.done')

/** The machine files of this run (sequencer.mjs) that have not yet released the machine. */
export function machineFilesToCome(env: NodeJS.ProcessEnv = process.env): string[] {
  const names = (env[MachineFirstEnv] ?? '').split(',').filter(Boolean)
  return names.filter((n) => !existsSync(join(doneDir(), n)))
}

/** The machine lock, shared: waits until the run's machine files have run, and while a file has the machine to itself. */
export async function acquireShared(waitMs = LockWaitMs): Promise<void> {
  if (sharedHeld > 0) {
    sharedHeld++
    return
  }
  const deadline = Date.now() + waitMs
  while (machineFilesToCome().length > 0) {
    if (Date.now() > deadline) throw new Error(`${machineFilesToCome().join(', ')} still to run first after ${waitMs} ms`)
    await sleep(PollMs)
  }
  mkdirSync(sharedDir(), {recursive: true})
  for (;;) {
    if (!machineLock.heldElsewhere()) {
      writeFileSync(sharedFile(), '')
      // Taken between the check and the write: give way to it.
      if (!machineLock.heldElsewhere()) break
      rmSync(sharedFile(), {force: true})
    }
    if (Date.now() > deadline) throw new Error(`the machine is still held by pid ${machineLock.owner() ?? 'unknown'} after ${waitMs} ms`)
    await sleep(PollMs)
  }
  sharedHeld = 1
}

export function releaseShared(): void {
  if (sharedHeld === 0) return
  sharedHeld--
  if (sharedHeld === 0) rmSync(sharedFile(), {force: true})
}

/** The machine to this file alone: no new shared holder starts, and the ones running finish first. */
export async function acquireMachine(waitMs = LockWaitMs): Promise<void> {
  const deadline = Date.now() + waitMs
  await machineLock.acquire(waitMs)
  while (otherSharedHolders().length > 0) {
    if (Date.now() > deadline) {
      machineLock.release()
      throw new Error(`files still running beside pid ${process.pid} after ${waitMs} ms (pids ${otherSharedHolders().join(', ')})`)
    }
    await sleep(PollMs)
  }
}

/** Releases the machine; `testPath` (the file's) marks it as run for the shared holders waiting on the machine files. */
export function releaseMachine(testPath?: string): void {
  machineLock.release()
  if (testPath === undefined) return
  mkdirSync(doneDir(), {recursive: true})
  writeFileSync(join(doneDir(), basename(testPath)), '')
}
