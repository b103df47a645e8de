import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import type {ContainerProcess} from '../process/container-process.js'
import type {OutputPipes} from '../process/instance-io.js'
import type {ContainerState, Termination} from '../container/state.js'
import type {PodSandbox} from '../sandbox/pod-sandbox.js'
import type {RealLink} from '../volumes/volumes.js'

/**
 * What survives vnode itself, per pod: enough to find (and adopt or kill)
 * the pod's processes after a restart, and to recover restart counts.
 * Written atomically (write + rename) as <sandbox>/record.json.
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

export const PodRecordFile = 'record.json'

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

export function podSandbox(stateDir: string, uid: string): string {
  return join(stateDir, 'pods', uid)
}

/**
 * Synchronous on purpose: once a process is spawned its pid must be on disk
 * before anything else can happen, or a crash right then leaves a process
 * no later vnode can adopt. Compact JSON, and the sandbox is made only when
 * missing: this runs on every container state change.
 */
export function writePodRecord(record: PodRecord): void {
  const path = join(record.sandbox, PodRecordFile)
  const tmp = `${path}.tmp-${process.pid}`
  const text = JSON.stringify(record)
  try {
    writeFileSync(tmp, text, {mode: 0o600})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    mkdirSync(record.sandbox, {recursive: true, mode: 0o700})
    writeFileSync(tmp, text, {mode: 0o600})
  }
  renameSync(tmp, path)
}

export function readPodRecord(sandbox: string): PodRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(sandbox, PodRecordFile), 'utf8')) as PodRecord
    return r.version === 1 ? r : undefined
  } catch {
    return undefined
  }
}
