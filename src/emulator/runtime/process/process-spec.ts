import {constants} from 'node:os'
import type {Clock} from '../../../common/clock.js'
import type {LogRotation} from '../logs/writer.js'
import type {ContainerSandboxSpec} from '../sandbox/spec.js'
import type {FifoMaker, OutputPipes} from './instance-io.js'

/** A container instance's timings (container-process.ts). How often a terminating process group is checked. */
export const DefaultKillPollMs = 50
/** How long to wait for a process group to vanish after SIGKILL before giving up on it. */
export const DefaultKillWaitMs = 5_000
/** How long output pipes may stay open after the main process exited (held by escaped descendants). */
export const DefaultPipeDrainMs = 2_000

export interface SpawnSpec {
  argv: string[]
  env: Record<string, string>
  cwd: string
  logPath: string
  /** Path prefix of the instance's output pipes (outputPipes). */
  pipes: string
  rotation?: LogRotation
  /** The node's pipe maker, with its reserve (fifo.ts); a shared one without a reserve by default. */
  fifos?: FifoMaker
  /** Keep a stdin pipe open for `kubectl attach` (the container's `stdin: true`). */
  stdin?: boolean
  /** Run on a pseudo-terminal (the container's `tty: true`): container-tty.ts. */
  tty?: boolean
  /** Run in a pod sandbox (namespaces mode); a bare host process when unset. cwd is then in the container's view. */
  sandbox?: ContainerSandboxSpec
  /**
   * The cgroup.procs files the main process joins before its program runs,
   * so the cgroup's limits and accounting cover it from its first page, as a
   * container's process is created in its cgroup: a bare one places itself
   * (placed-argv.ts), a sandbox's PID 1 is placed by the helper that started
   * its monitor (helper-script.ts); otherwise `place` does it.
   */
  cgroupProcs?: string[]
  /** Places the main process (its host pid) in its cgroups when the start could not have it join cgroupProcs first; a throw fails the start. */
  place?: (pid: number) => Promise<void>
  /** The runtime's clock, for the instance's start and finish times; the real one by default. */
  clock?: Clock
  /**
   * In a sandbox: the period whose boundaries its program's start is looked
   * for just before (the relist's: a start seen after a relist is reported a
   * whole period later), besides the setup wait's back-off (sandboxed-start.ts).
   */
  lookPeriodMs?: number
}

export type OutputStream = 'stdout' | 'stderr'
/** Sees the container's output as it is written, besides the log (attach). */
export type OutputListener = (stream: OutputStream, chunk: Buffer) => void

/** A process found alive after a vnode restart (adopt.ts): same pid and /proc start time. */
export interface AdoptSpec {
  pid: number
  startTicks: number
  startedAt: Date
  env: Record<string, string>
  cwd: string
  logPath: string
  pipes: OutputPipes
  rotation?: LogRotation
  /** It runs in a sandbox: pid is its PID 1 (and the netns flag says whether it has a network namespace of its own). */
  sandboxed?: SandboxedProcess
  /** Its process group, when not the pid's own (a sandbox's bwrap). */
  pgid?: number
}

/** How a sandboxed instance runs: in a network namespace of its own; in the pod's shared PID namespace (not PID 1 there). */
export interface SandboxedProcess {
  netns: boolean
  sharedPid?: boolean
  /** hostIPC: it has the host's IPC namespace, which exec does not join (it has its own otherwise). */
  hostIPC?: boolean
  /** Its writable layer's user namespace (unprivileged): held by bwrap's own process, the one exec joins first. */
  layerUserNamespace?: boolean
  /** The setpriv argv of the container's identity (sandbox/security-context.ts): exec, probes and hooks run as the container does. */
  identity?: string[]
}

export interface ExitInfo {
  exitCode: number
  signal?: NodeJS.Signals
  finishedAt: Date
  /** The process was not vnode's child (adopted): its exit status cannot be read. */
  unknown?: boolean
  /** The sandbox ended before its program ran (bwrap's own failure, after it named PID 1): a failed start, not an exit. */
  setupFailed?: boolean
}

export interface RawExit {
  code: number | null
  signal: NodeJS.Signals | null
  unknown?: boolean
  setupFailed?: boolean
}

/** An instance's end as the runtime reports it: a signal's is 128+n, as a runtime gives it. */
export function exitInfo({code, signal, unknown, setupFailed}: RawExit, finishedAt: Date): ExitInfo {
  return {
    exitCode: code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0),
    signal: signal ?? undefined,
    finishedAt,
    ...(unknown ? {unknown} : {}),
    ...(setupFailed ? {setupFailed} : {}),
  }
}
