import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import type {ContainerProcess} from '../process/container-process.js'
import type {OutputPipes} from '../process/instance-io.js'
import type {ContainerState, Termination} from '../container/state.js'
import type {PodSandbox} from '../sandbox/pod-sandbox.js'
import type {RealLink} from '../volumes/volumes.js'

/**
 * What survives vnode itself, per pod: enough to find (and adopt or kill)
 * the pod's processes after a restart, and to recover restart counts.
 * Written in place, in turns, to two files of the sandbox (PodRecordWriter).
 */
export interface PodRecord {
  version: 1
  uid: string
  namespace: string
  name: string
  sandbox: string
  containers: ContainerRecord[]
  /** Real symlinks made at mountPaths, removed with the pod. */
  links: RealLink[]
  updatedAt: string
  /** Which write this is (PodRecordWriter): of the two files, the one with the higher number is the newer. */
  seq?: number
  /** The holder of the pod's shared PID namespace (sandbox/pod-pid-namespace.ts). */
  pidHolder?: {pid: number; startTicks: number}
  /** The pod as last handed to the runtime: a restarted vnode rebuilds the pod's runtime from it (adopt.ts). */
  pod?: V1Pod
}

/** A finished instance, as ContainerState keeps it (dates as ISO strings). */
export interface RecordedTermination {
  exitCode: number
  signal?: number
  reason: string
  message?: string
  startedAt?: string
  finishedAt: string
  containerID?: string
}

export interface ContainerRecord {
  name: string
  kind: 'init' | 'sidecar' | 'regular' | 'ephemeral'
  containerID?: string
  /** The main process, which is also the process group id. */
  pid?: number
  /** /proc/<pid>/stat starttime: tells this process from a later one with the same pid. */
  startTicks?: number
  startedAt?: string
  running: boolean
  restartCount: number
  logPath?: string
  exitCode?: number
  /** The running instance's output pipes (container-process.ts). */
  pipes?: OutputPipes
  /** The running instance's cgroup, relative to the node root (cgroups/layout.ts). */
  cgroup?: string
  /** It runs in a pod sandbox: pid is its PID 1, signalled alone. */
  sandboxed?: {netns: boolean; sharedPid?: boolean; hostIPC?: boolean; layerUserNamespace?: boolean; identity?: string[]}
  /** Its process group when not pid's own (a sandbox's bwrap). */
  pgid?: number
  imageID?: string
  /** The last finished instance, so a restarted vnode reports it. */
  lastExit?: RecordedTermination
}

/** A finished instance as the record keeps it (dates as ISO strings), and back. */
export function recordTermination(t: Termination): RecordedTermination {
  return {...t, startedAt: t.startedAt?.toISOString(), finishedAt: t.finishedAt.toISOString()}
}

export function restoreTermination(t: RecordedTermination): Termination {
  return {...t, startedAt: t.startedAt ? new Date(t.startedAt) : undefined, finishedAt: new Date(t.finishedAt)}
}

/** One container's record: its live instance (pid, start time, pipes, cgroup) and its last exit. */
export function containerRecord(c: ContainerState, cgroup: string | undefined): ContainerRecord {
  const proc = c.proc
  return {
    name: c.name,
    kind: c.kind,
    containerID: c.containerID,
    pid: proc?.pid,
    startTicks: proc?.startTicks,
    startedAt: proc?.startedAt.toISOString(),
    running: c.running,
    restartCount: c.restartCount,
    logPath: c.logPath,
    exitCode: c.lastExit?.exitCode,
    pipes: proc?.pipes,
    cgroup,
    sandboxed: proc?.sandboxed,
    pgid: proc && proc.pgid !== proc.pid ? proc.pgid : undefined,
    imageID: c.imageID || undefined,
    lastExit: c.lastExit ? recordTermination(c.lastExit) : undefined,
  }
}

/** One container as adoption found it (adopt.ts). */
export interface RestoredContainer {
  name: string
  /** Instances started so far (restartCount + 1), 0 if it never ran. */
  instances: number
  containerID?: string
  logPath?: string
  imageID?: string
  /** Finished instances, newest first. */
  history: Termination[]
  /** The live instance, when its process was found. */
  proc?: ContainerProcess
  /** The live instance's cgroup (relative to the node root). */
  cgroup?: string
}

/** The record of a pod as its runtime holds it now. */
export function podRecord(pod: V1Pod, sandbox: PodSandbox, containers: readonly ContainerState[], now: Date): PodRecord {
  const m = pod.metadata!
  return {
    version: 1,
    uid: m.uid!,
    namespace: m.namespace!,
    name: m.name!,
    sandbox: sandbox.dir,
    links: sandbox.links,
    ...(sandbox.pidHolder ? {pidHolder: sandbox.pidHolder} : {}),
    updatedAt: now.toISOString(),
    pod,
    containers: containers.map((c) => containerRecord(c, c.proc ? sandbox.cgroup.containerPath(c.name) : undefined)),
  }
}

/** Where the pods' directories are: `<stateDir>/pods`. */
export function podsDir(stateDir: string): string {
  return join(stateDir, 'pods')
}

export function podSandbox(stateDir: string, uid: string): string {
  return join(podsDir(stateDir), uid)
}

/** The two files a pod's record is written to in turns. */
export const PodRecordSlots = ['record-a.json', 'record-b.json'] as const
/** The one file an earlier vnode wrote its record to (write + rename): read after an upgrade, never written. */
export const LegacyPodRecordFile = 'record.json'

/**
 * Writes one pod's record. Synchronous on purpose: once a process is
 * spawned its pid must be on disk before anything else can happen, or a
 * crash right then leaves a process no later vnode can adopt.
 *
 * In place, in turns: each write goes to the file of the two that does not
 * hold the newest record, with a number one above it, so a write cut short
 * (vnode killed in it) leaves the record before it whole in the other file,
 * and a reader takes the complete one with the higher number. A write and a
 * rename made a new file at every write, and a new inode is the costly part
 * of a small write on ext4 (it searches the inode table past recently
 * deleted ones): this runs at every container state change, on the event
 * loop. Compact JSON, and the sandbox is made only when missing.
 */
export class PodRecordWriter {
  private seq: number | undefined

  write(record: PodRecord): void {
    // The first write after a restart goes on from the numbers already on disk.
    this.seq ??= readPodRecord(record.sandbox)?.seq ?? 0
    const seq = ++this.seq
    const path = join(record.sandbox, PodRecordSlots[seq % 2]!)
    const text = JSON.stringify({...record, seq})
    try {
      writeFileSync(path, text, {mode: 0o600})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      mkdirSync(record.sandbox, {recursive: true, mode: 0o700})
      writeFileSync(path, text, {mode: 0o600})
    }
  }
}

/** The newest complete record of a sandbox (of its two files, or the one an earlier vnode wrote); none when none can be read. */
export function readPodRecord(sandbox: string): PodRecord | undefined {
  let newest: PodRecord | undefined
  for (const file of [...PodRecordSlots, LegacyPodRecordFile]) {
    try {
      const r = JSON.parse(readFileSync(join(sandbox, file), 'utf8')) as PodRecord
      if (r.version === 1 && (newest === undefined || (r.seq ?? 0) > (newest.seq ?? 0))) newest = r
    } catch {
      // Missing, or a write cut short: the other file holds the record.
    }
  }
  return newest
}
