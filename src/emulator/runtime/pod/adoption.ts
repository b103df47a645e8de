import {readdirSync, readFileSync, readlinkSync} from 'node:fs'
import {join} from 'node:path'
import {ContainerProcess} from '../process/container-process.js'
import {outputPipes} from '../process/instance-io.js'
import type {LogRotation} from '../logs/writer.js'
import {ContainerStatusUnknownExitCode, ContainerStatusUnknownReason} from '../../provider/pod-defaults.js'
import {podsDir, podSandbox, readPodRecord, restoreTermination, type ContainerRecord, type PodRecord, type RestoredContainer} from './record.js'
import {groupMembers, isLiveProcess, readStat, signalGroup} from '../process/proc.js'
import type {NodeCgroups} from '../cgroups/node-cgroups.js'
import {stopPidNamespaceHolder} from '../sandbox/pod-pid-namespace.js'
import {terminationFileOf} from '../container/config.js'
import type {ContainerHost} from '../container/host.js'

/**
 * Adoption: after vnode was killed (SIGKILL, crash), its containers keep
 * running in their own process groups. The next `up` with the same state
 * dir reads every pod record (pod-record.ts) and takes over each recorded
 * process that is still the same process: same pid AND same /proc start
 * time, so a pid the kernel reused for something else is never mistaken
 * for a container. Output continues through the instance's named pipes
 * (container-process.ts), which the container holds open itself; while
 * vnode is down, a container's output waits in its pipe (64 KiB), and a
 * container that writes more blocks until vnode reads it again.
 *
 * A container recorded running whose process is gone ended while nobody
 * watched: ContainerStatusUnknown (exit 137), as the kubelet reports a
 * container it cannot locate. A container recorded finished keeps its exit.
 */

export const LostContainerMessage = 'The container could not be located when vnode restarted'

/** Every pod record under <stateDir>/pods/ (unreadable ones are skipped). */
export function findPodRecords(stateDir: string): PodRecord[] {
  let dirs: string[]
  try {
    dirs = readdirSync(podsDir(stateDir))
  } catch {
    return []
  }
  const out: PodRecord[] = []
  for (const d of dirs) {
    const r = readPodRecord(podSandbox(stateDir, d))
    if (r && r.uid === d) out.push(r)
  }
  return out
}

/** The recorded process is alive and is the one recorded (pid reuse check). */
export function isSameProcess(pid: number | undefined, startTicks: number | undefined): boolean {
  return !!pid && !!startTicks && isLiveProcess(pid, startTicks)
}

/**
 * Kills what is left of a recorded container whose main process is gone:
 * members of its process group. The group id cannot have been reused while
 * members are left, and a reused pid (a different process) is left alone.
 */
export function killLeftovers(c: ContainerRecord): void {
  if (!c.pid) return
  if (isSameProcess(c.pid, c.startTicks)) {
    // A sandbox's PID 1 takes its whole PID namespace with it.
    if (c.sandboxed) process.kill(c.pid, 'SIGKILL')
    else signalGroup(c.pid, 'SIGKILL')
    return
  }
  if (c.sandboxed) return
  if (readStat(c.pid) === undefined && groupMembers(c.pid).length > 0) signalGroup(c.pid, 'SIGKILL')
}

/** The environment a process was started with (readable for our own user's processes). */
export function processEnv(pid: number): Record<string, string> {
  const env: Record<string, string> = {}
  try {
    for (const kv of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
      const i = kv.indexOf('=')
      if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1)
    }
  } catch {
    /* gone, or not ours */
  }
  return env
}

export function processCwd(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/cwd`)
  } catch {
    return '/'
  }
}

/**
 * One recorded container as found now: a live process adopted, or its last
 * known exit. With cgroups, the process must also still be in the
 * container's cgroup, and whatever is left in the cgroup of a container
 * whose main process is gone is killed.
 */
export function restoreContainer(c: ContainerRecord, rotation: LogRotation | undefined, pollMs?: number, cgroups?: NodeCgroups): RestoredContainer {
  const instances = c.containerID ? c.restartCount + 1 : 0
  const history = c.lastExit ? [restoreTermination(c.lastExit)] : []
  const base = {name: c.name, instances, containerID: c.containerID, logPath: c.logPath, imageID: c.imageID, history}
  if (!c.running) return base
  const inCgroup = !cgroups || !c.cgroup || (!!c.pid && cgroups.contains(c.cgroup, c.pid))
  if (c.pid && c.startTicks && c.logPath && isSameProcess(c.pid, c.startTicks) && inCgroup) {
    const proc = ContainerProcess.adopt(
      {
        pid: c.pid,
        startTicks: c.startTicks,
        startedAt: c.startedAt ? new Date(c.startedAt) : new Date(),
        env: processEnv(c.pid),
        cwd: processCwd(c.pid),
        logPath: c.logPath,
        pipes: c.pipes ?? outputPipes(join('/nonexistent', c.name)),
        rotation,
        sandboxed: c.sandboxed,
        pgid: c.pgid,
      },
      pollMs,
    )
    return {...base, proc, ...(cgroups && c.cgroup ? {cgroup: c.cgroup} : {})}
  }
  killLeftovers(c)
  if (cgroups && c.cgroup) cgroups.killNow(c.cgroup)
  const lost = {
    exitCode: ContainerStatusUnknownExitCode,
    reason: ContainerStatusUnknownReason,
    message: LostContainerMessage,
    ...(c.startedAt ? {startedAt: new Date(c.startedAt)} : {}),
    finishedAt: new Date(),
    ...(c.containerID ? {containerID: c.containerID} : {}),
  }
  return {...base, history: [lost, ...history].slice(0, 2)}
}

/** Kills every live process of a record (a pod that cannot be rebuilt, or is gone from the API). */
export function killRecorded(record: PodRecord): void {
  for (const c of record.containers) killLeftovers(c)
  stopPidNamespaceHolder(record.pidHolder)
}

/**
 * The containers as the record and /proc found them: live instances are
 * watched again (exit, probes, logs); the rest keep their last exit, and the
 * next sync restarts them per restartPolicy. Returns whether the init
 * containers are done: each completed, or a regular container ran.
 */
export function restoreContainers(host: ContainerHost, found: RestoredContainer[]): boolean {
  for (const f of found) {
    const c = host.containers.find((x) => x.name === f.name)
    if (!c) continue
    c.restore(f)
    if (!f.proc) continue
    host.sandbox.cgroup.adopt(c.name, f.cgroup, c.spec)
    c.adopt(f.proc, terminationFileOf(host.sandbox.dir, c.spec, !!f.proc.sandboxed))
    host.watchProcess(c, f.proc)
  }
  host.sandbox.refresh.track(host.pod)
  const inits = host.containers.filter((c) => c.kind === 'init' || c.kind === 'sidecar')
  return host.containers.some((c) => c.kind === 'regular' && c.everRan) || inits.every((c) => (c.kind === 'sidecar' ? c.running : c.lastExit?.exitCode === 0 && !c.running))
}
