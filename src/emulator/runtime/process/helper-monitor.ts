import {EventEmitter} from 'node:events'
import {existsSync} from 'node:fs'
import {PassThrough} from 'node:stream'
import {refusedWriteMessage} from './command-errors.js'
import type {PerlScript} from './host-programs.js'
import {DefaultAdoptedPollMs} from './proc.js'

/** What a sandbox's monitor is to its start, whether vnode's child or the helper's (sandbox/spawn.ts). */
export interface SandboxMonitor {
  readonly pid?: number
  readonly exitCode: number | null
  readonly signalCode: NodeJS.Signals | null
  kill(signal?: NodeJS.Signals | number): boolean
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown
  once(event: 'error', listener: (error: Error) => void): unknown
  unref(): void
}

export interface HelperSpawn {
  argv: string[]
  env: Record<string, string>
  /**
   * argv is `perl -e source args...`: the helper runs the source itself in the monitor's process, args its @ARGV,
   * instead of starting perl again (the source must end in an exec).
   */
  script?: PerlScript
  /** The instance's output pipes (opened read-write for it, as instance-io.ts does). */
  stdout: string
  stderr: string
  /** A PID namespace file for fd 5. */
  pidns?: string
  /**
   * The cgroup.procs files the sandbox's PID 1 joins: the helper writes its pid to them as soon as the status names it,
   * and lets it go (the monitor's `placed`); without them it waits for go().
   */
  cgroupProcs?: string[]
}

/** A bare container process the helper starts (process/container-process.ts): no sandbox, no status or block fd. */
export interface HelperBareSpawn {
  argv: string[]
  env: Record<string, string>
  /** The instance's output pipes (opened read-write for it). */
  stdout: string
  stderr: string
  /** Its working directory on the host. */
  cwd: string
}

/** A monitor started by the helper: its pid, what it writes on its status fd, its exit as the helper reaped it. */
export class HelperMonitor extends EventEmitter implements SandboxMonitor {
  pid?: number
  exitCode: number | null = null
  signalCode: NodeJS.Signals | null = null
  /** What the monitor writes on its fd 3, ended when that closes. */
  readonly status = new PassThrough()
  /**
   * With cgroupProcs: settles before the status that names PID 1 is passed on, fulfilled once the helper placed PID 1
   * and let it go, rejected when a write was refused (PID 1 killed).
   */
  readonly placed: Promise<void>
  private placedSettle: {resolve: () => void; reject: (e: Error) => void} | undefined

  constructor(
    readonly id: string,
    private readonly release: (m: HelperMonitor) => void,
    private readonly send: (fields: string[]) => void,
  ) {
    super()
    this.placed = new Promise((resolve, reject) => (this.placedSettle = {resolve, reject}))
    // Nobody awaits it when the status never named PID 1 (the start failed before): not an unhandled rejection.
    this.placed.catch(() => undefined)
  }

  /** The helper's `placed` answer: PID 1 is in its cgroups and runs, or the write to `file` was refused with `code`. */
  placedAnswer(failure?: {file: string; code: string; pid: string}): void {
    if (!failure) this.placedSettle?.resolve()
    else this.placedSettle?.reject(new Error(refusedWriteMessage(failure.file, failure.pid, failure.code)))
  }

  /** Lets it run: its block fd gets its word. */
  go(): void {
    this.send(['go', this.id])
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.pid === undefined || this.exitCode !== null || this.signalCode !== null) return false
    try {
      process.kill(this.pid, signal)
      return true
    } catch {
      return false
    }
  }

  /** It no longer keeps vnode running (a child process's unref). */
  unref(): void {
    this.release(this)
  }

  ended(code: number | null, signal: NodeJS.Signals | null): void {
    this.exitCode = code
    this.signalCode = signal
    this.release(this)
    this.emit('exit', code, signal)
  }
}

/** A monitor whose helper is gone: looked for in /proc as an adopted process is, its end reported with an unknown status. */
export function watchOrphan(m: HelperMonitor): void {
  m.status.end()
  const look = setInterval(() => {
    if (existsSync(`/proc/${m.pid}`)) return
    clearInterval(look)
    m.ended(null, null)
  }, DefaultAdoptedPollMs)
  look.unref()
}
