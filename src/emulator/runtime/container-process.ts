import {execa, type ResultPromise} from 'execa'
import {constants} from 'node:os'
import {stat} from 'node:fs/promises'
import type {Writable} from 'node:stream'
import {ContainerLogWriter, type LogRotation} from './logs.js'
import {isGroupAlive, readStat, signalGroup} from './proc.js'

/** How often a terminating process group is checked. */
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
  rotation?: LogRotation
  /** Keep a stdin pipe open for `kubectl attach` (the container's `stdin: true`). */
  stdin?: boolean
}

export type OutputStream = 'stdout' | 'stderr'
/** Sees the container's output as it is written, besides the log (attach). */
export type OutputListener = (stream: OutputStream, chunk: Buffer) => void

export interface ExitInfo {
  exitCode: number
  signal?: NodeJS.Signals
  finishedAt: Date
}

/** A container process that could not be started: the runtime's StartError. */
export class StartError extends Error {}

/**
 * One container instance: a process started from an argv array (never a
 * shell) in its own process group, with its output in the CRI log. When the
 * main process exits, whatever is left of its group is killed, as a
 * container's PID namespace dies with its init.
 */
export class ContainerProcess {
  readonly startedAt = new Date()
  readonly exited: Promise<ExitInfo>
  exit: ExitInfo | undefined
  private readonly outputListeners = new Set<OutputListener>()

  private constructor(
    readonly pid: number,
    /** Clock ticks after boot, from /proc: identifies this process across pid reuse. */
    readonly startTicks: number,
    private readonly child: ResultPromise,
    private readonly log: ContainerLogWriter,
    /** What it was started with: hooks run in the same environment and directory. */
    readonly env: Record<string, string>,
    readonly cwd: string,
  ) {
    const drained = Promise.all([log.attach(child.stdout!, 'stdout'), log.attach(child.stderr!, 'stderr')])
    child.stdout!.on('data', (chunk: Buffer) => this.emitOutput('stdout', chunk))
    child.stderr!.on('data', (chunk: Buffer) => this.emitOutput('stderr', chunk))
    child.stdin?.on('error', () => undefined)
    this.exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => {
        const info: ExitInfo = {exitCode: code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0), signal: signal ?? undefined, finishedAt: new Date()}
        signalGroup(pid, 'SIGKILL')
        child.stdin?.destroy()
        const timer = setTimeout(() => {
          child.stdout?.destroy()
          child.stderr?.destroy()
        }, DefaultPipeDrainMs)
        void drained.then(() => {
          clearTimeout(timer)
          log.close()
          this.exit = info
          resolve(info)
        })
      })
    })
  }

  get pgid(): number {
    return this.pid
  }

  static async start(spec: SpawnSpec): Promise<ContainerProcess> {
    const [file, ...args] = spec.argv
    if (!file) throw new StartError('failed to start container process: no command to run')
    try {
      if (!(await stat(spec.cwd)).isDirectory()) throw new Error('not a directory')
    } catch {
      throw new StartError(`failed to start container process: chdir to cwd ("${spec.cwd}") set in config.json failed: no such file or directory`)
    }
    const log = new ContainerLogWriter(spec.logPath, spec.rotation)
    const child = execa(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      extendEnv: false,
      detached: true,
      cleanup: false,
      stdin: spec.stdin ? 'pipe' : 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      forceKillAfterDelay: false,
    })
    void child.catch(() => undefined)
    const spawned = await new Promise<true | NodeJS.ErrnoException>((resolve) => {
      child.once('spawn', () => resolve(true))
      child.once('error', (e) => resolve(e as NodeJS.ErrnoException))
    })
    if (spawned !== true || child.pid === undefined) {
      log.close()
      const e = spawned === true ? undefined : spawned
      throw new StartError(startErrorMessage(file, e))
    }
    return new ContainerProcess(child.pid, readStat(child.pid)?.startTime ?? 0, child, log, spec.env, spec.cwd)
  }

  /** The container's stdin pipe, when it was started with one and it is still open. */
  get stdin(): Writable | undefined {
    const s = this.child.stdin
    return s && !s.destroyed && !s.writableEnded ? s : undefined
  }

  /** Closes the container's stdin (EOF), as after the first attach of a `stdinOnce` container. */
  closeStdin(): void {
    this.child.stdin?.end()
  }

  /** Subscribes to the container's output from now on; returns the unsubscribe. */
  onOutput(listener: OutputListener): () => void {
    this.outputListeners.add(listener)
    return () => this.outputListeners.delete(listener)
  }

  private emitOutput(stream: OutputStream, chunk: Buffer): void {
    for (const l of this.outputListeners) l(stream, chunk)
  }

  /** Whether any process of the container (its group) is alive; zombies do not count. */
  alive(): boolean {
    return this.exit === undefined || isGroupAlive(this.pgid)
  }

  signal(signal: NodeJS.Signals): void {
    signalGroup(this.pgid, signal)
  }

  /**
   * SIGTERM to the group, SIGKILL once `deadline()` (epoch ms, re-read on
   * every poll so it can move closer) has passed. Resolves once the main
   * process has exited and no process of the group is left.
   */
  async terminate(deadline: () => number, signal: AbortSignal | undefined = undefined): Promise<ExitInfo> {
    this.signal('SIGTERM')
    let killedAt = 0
    while (this.exit === undefined || isGroupAlive(this.pgid)) {
      const now = Date.now()
      if (!killedAt && (now >= deadline() || signal?.aborted)) {
        killedAt = now
        this.signal('SIGKILL')
      }
      if (killedAt && now - killedAt > DefaultKillWaitMs) break
      if (killedAt) this.signal('SIGKILL')
      await new Promise((r) => setTimeout(r, DefaultKillPollMs))
    }
    return this.exited
  }
}

function startErrorMessage(file: string, e: NodeJS.ErrnoException | undefined): string {
  const prefix = 'failed to start container process: exec'
  if (e?.code === 'ENOENT') return `${prefix}: "${file}": executable file not found in $PATH`
  if (e?.code === 'EACCES') return `${prefix}: "${file}": permission denied`
  return `${prefix}: "${file}": ${e?.message ?? 'unknown error'}`
}
