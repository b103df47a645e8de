import {execa} from 'execa'
import {RealClock, type Clock} from '../../../common/clock.js'
import {closeSync} from 'node:fs'
import {stat} from 'node:fs/promises'
import {isAbsolute} from 'node:path'
import {Readable, type Writable} from 'node:stream'
import {StartError, startErrorMessage} from './command-errors.js'
import {resolveExecutable} from './executable.js'
import {openTerminal, spawnOnTerminal, type ContainerTerminal} from '../container/tty.js'
import {ContainerLogWriter} from '../logs/writer.js'
import {DefaultAdoptedPollMs, isGroupAlive, readStat, signalGroup} from './proc.js'
import type {ContainerSandboxSpec} from '../sandbox/spec.js'
import {enterArgv, SandboxStartError, spawnSandboxed} from '../sandbox/spawn.js'
import {placedArgv} from './placed-argv.js'
import {helpers} from './helper-runner.js'
import {openInstanceIO, openReaderOrEmpty, outputPipes, removePipes, type OutputPipes} from './instance-io.js'
import {DefaultKillPollMs, DefaultKillWaitMs, DefaultPipeDrainMs, exitInfo} from './process-spec.js'
import type {AdoptSpec, ExitInfo, OutputListener, OutputStream, RawExit, SandboxedProcess, SpawnSpec} from './process-spec.js'
import {monitorExit, sandboxedProcess, sandboxExit, waitForProgram} from './sandboxed-start.js'

/**
 * A bare instance's step between its spawn and its program's work (beforeExec: its cgroups, unless it placed itself):
 * when it fails, the instance's group is killed and waited for, what its start made is undone, and the start fails.
 */
async function placeOrUndo(spec: SpawnSpec, pid: number, placed: boolean, exited: Promise<unknown>, undo: () => void): Promise<void> {
  try {
    await spec.beforeExec?.(pid, placed)
  } catch (error) {
    signalGroup(pid, 'SIGKILL')
    await exited
    undo()
    throw new StartError(`failed to start container process: ${(error as Error).message}`)
  }
}

/**
 * One container instance: a process started from an argv array (never a
 * shell) in its own process group, with its output in the CRI log. When the
 * main process exits, whatever is left of its group is killed, as a
 * container's PID namespace dies with its init.
 */
export class ContainerProcess {
  readonly exited: Promise<ExitInfo>
  exit: ExitInfo | undefined
  private mainExited = false
  private enteredOnce: Promise<void> | undefined
  private readonly outputListeners = new Set<OutputListener>()

  private constructor(
    readonly pid: number,
    /** Clock ticks after boot, from /proc: identifies this process across pid reuse. */
    readonly startTicks: number,
    readonly startedAt: Date,
    rawExit: Promise<RawExit>,
    streams: {stdout: Readable; stderr: Readable},
    log: ContainerLogWriter,
    /** What it was started with: hooks run in the same environment and directory. */
    readonly env: Record<string, string>,
    readonly cwd: string,
    readonly pipes: OutputPipes,
    /** The container's stdin (attach), when it was started with one; never for an adopted process. */
    private readonly stdinPipe?: Writable,
    /** In a sandbox: pid is PID 1 of its PID namespace, signalled alone; ending it ends the namespace. */
    readonly sandboxed?: SandboxedProcess,
    /** The process group of the instance: bwrap's in a sandbox (its PID 1 is a member), else the main process's own. */
    private readonly groupId?: number,
    private readonly clock: Clock = RealClock,
    /** A sandboxed start's look period for its program (SpawnSpec.lookPeriodMs). */
    private readonly lookPeriodMs?: number,
  ) {
    void rawExit.then(() => {
      this.mainExited = true
    })
    const drained = Promise.all([log.attach(streams.stdout, 'stdout'), log.attach(streams.stderr, 'stderr')])
    streams.stdout.on('data', (chunk: Buffer) => this.emitOutput('stdout', chunk))
    streams.stderr.on('data', (chunk: Buffer) => this.emitOutput('stderr', chunk))
    stdinPipe?.on('error', () => undefined)
    this.exited = rawExit.then(
      (raw) =>
        new Promise<ExitInfo>((resolve) => {
          const info = exitInfo(raw, new Date(this.clock.now()))
          this.signal('SIGKILL')
          stdinPipe?.destroy()
          const timer = setTimeout(() => {
            streams.stdout.destroy()
            streams.stderr.destroy()
          }, DefaultPipeDrainMs)
          void drained.then(() => {
            clearTimeout(timer)
            log.close()
            removePipes(pipes)
            this.exit = info
            resolve(info)
          })
        }),
    )
  }

  /**
   * The main process still runs: the runtime's view of a container's state,
   * which has exited once its PID 1 has, while its output may still drain
   * (exit is set only after that, so it is never set while this is true).
   */
  get running(): boolean {
    return !this.mainExited
  }

  get pgid(): number {
    return this.groupId ?? this.pid
  }

  static async start(spec: SpawnSpec): Promise<ContainerProcess> {
    const [file, ...args] = spec.argv
    if (!file) throw new StartError('failed to start container process: no command to run')
    if (spec.sandbox) return spec.tty ? ContainerProcess.startSandboxedOnTerminal(spec, spec.sandbox) : ContainerProcess.startSandboxed(spec, spec.sandbox)
    try {
      if (!(await stat(spec.cwd)).isDirectory()) throw new Error('not a directory')
    } catch {
      throw new StartError(`failed to start container process: chdir to cwd ("${spec.cwd}") set in config.json failed: no such file or directory`)
    }
    if (spec.tty) return ContainerProcess.startOnTerminal(spec, file, args)
    if (!spec.stdin && helpers.canSpawn) return ContainerProcess.startFromHelper(spec, file, args)
    const {pipes, readers, out, err, log, startedAt, abandon} = await openInstanceIO(spec)
    const {argv: placedArgs, placed} = placedArgv(spec, file, args)
    const [program, ...programArgs] = placedArgs
    const spawn = () =>
      execa(program!, programArgs, {
        cwd: spec.cwd,
        env: spec.env,
        extendEnv: false,
        detached: true,
        cleanup: false,
        stdin: spec.stdin ? 'pipe' : 'ignore',
        stdout: out as number as 1, // a file descriptor: execa accepts any; its types narrow a lone number to 1/2
        stderr: err as number as 2,
        buffer: false,
        reject: false,
        forceKillAfterDelay: false,
      })
    let child: ReturnType<typeof spawn>
    try {
      child = spawn()
    } finally {
      // The child has its copies (spawn dups them synchronously); ours would keep the pipes from ending.
      closeSync(out)
      closeSync(err)
    }
    void child.catch(() => undefined)
    const rawExit = new Promise<RawExit>((resolve) => child.once('exit', (code, signal) => resolve({code, signal})))
    const spawned = await new Promise<true | NodeJS.ErrnoException>((resolve) => {
      child.once('spawn', () => resolve(true))
      child.once('error', (e) => resolve(e as NodeJS.ErrnoException))
      // Some spawn failures (E2BIG: environment or arguments too large) throw inside execa: only its result says so.
      void child.then((r) => resolve((r.cause as NodeJS.ErrnoException | undefined) ?? new Error(r.shortMessage ?? 'spawn failed')))
    })
    if (spawned !== true || child.pid === undefined) {
      abandon()
      const e = spawned === true ? undefined : spawned
      throw new StartError(startErrorMessage(file, e, spec.cwd))
    }
    await placeOrUndo(spec, child.pid, placed, rawExit, abandon)
    return new ContainerProcess(child.pid, readStat(child.pid)?.startTime ?? 0, startedAt, rawExit, readers, log, spec.env, spec.cwd, pipes, child.stdin ?? undefined, undefined, undefined, spec.clock)
  }

  /**
   * A bare instance without stdin, started by the helper (process/helper-runner.ts): libuv forks vnode whole for a
   * spawn and holds its event loop until the child execs, about 4 ms a start at vnode's size, which in a burst of
   * starts was a quarter of the event loop's work.
   */
  private static async startFromHelper(spec: SpawnSpec, file: string, args: string[]): Promise<ContainerProcess> {
    const {pipes, readers, out, err, log, startedAt, abandon} = await openInstanceIO(spec)
    // The placing step stays a perl of its own (not a script of the helper's fork): its exec is the one that takes the
    // container's environment and arguments, so one too large for the kernel (E2BIG) fails the start, as vnode's own spawn did.
    const {argv, placed} = placedArgv(spec, file, args)
    let pid: number
    let rawExit: Promise<RawExit>
    try {
      const monitor = await helpers.spawnBare({argv, env: spec.env, stdout: pipes.stdout, stderr: pipes.stderr, cwd: spec.cwd})
      pid = monitor.pid!
      rawExit = monitorExit(monitor)
    } catch (error) {
      abandon()
      const e = error as NodeJS.ErrnoException
      // An errno is the exec's (or the chdir's), worded as every other start's; anything else is the helper's.
      throw new StartError(e.code ? startErrorMessage(file, e, spec.cwd) : `failed to start container process: ${e.message}`)
    } finally {
      // Held until the helper has opened the pipes for the process: a pipe whose last writer goes ends its reader.
      closeSync(out)
      closeSync(err)
    }
    await placeOrUndo(spec, pid, placed, rawExit, abandon)
    return new ContainerProcess(pid, readStat(pid)?.startTime ?? 0, startedAt, rawExit, readers, log, spec.env, spec.cwd, pipes, undefined, undefined, undefined, spec.clock)
  }

  /** A `tty: true` instance (container-tty.ts): one output, the terminal's, logged as stdout. */
  private static async startOnTerminal(spec: SpawnSpec, file: string, args: string[]): Promise<ContainerProcess> {
    let path: string
    try {
      path = resolveExecutable(file, spec.env, spec.cwd)
    } catch (error) {
      const e = error as Error
      const relative = file.includes('/') && !isAbsolute(file) && /no such file/.test(e.message)
      throw new StartError(relative ? startErrorMessage(file, Object.assign(new Error(e.message), {code: 'ENOENT'}), spec.cwd) : `failed to start container process: ${e.message}`)
    }
    const startedAt = new Date((spec.clock ?? RealClock).now())
    let term: ContainerTerminal
    try {
      term = await spawnOnTerminal(path, args, {TERM: 'xterm', ...spec.env}, spec.cwd)
    } catch (error) {
      throw new StartError(`failed to start container process: exec: "${file}": ${(error as Error).message}`)
    }
    await placeOrUndo(spec, term.pid, false, term.exited, () => undefined)
    const log = new ContainerLogWriter(spec.logPath, spec.rotation)
    const proc = new ContainerProcess(
      term.pid,
      readStat(term.pid)?.startTime ?? 0,
      startedAt,
      term.exited,
      {stdout: term.output, stderr: Readable.from([])},
      log,
      spec.env,
      spec.cwd,
      outputPipes(spec.pipes),
      spec.stdin ? term.input : undefined,
      undefined,
      undefined,
      spec.clock,
    )
    proc.terminal = term
    return proc
  }

  /** A `tty: true` instance in a pod sandbox: bwrap's PID 1 on the slave side of a terminal vnode opened. */
  private static async startSandboxedOnTerminal(spec: SpawnSpec, sandbox: ContainerSandboxSpec): Promise<ContainerProcess> {
    const term = await openTerminal()
    const startedAt = new Date((spec.clock ?? RealClock).now())
    let started: Awaited<ReturnType<typeof spawnSandboxed>>
    try {
      started = await spawnSandboxed({
        argv: spec.argv,
        env: {TERM: 'xterm', ...spec.env},
        cwd: spec.cwd,
        sandbox,
        stdin: term.slaveFd,
        stdout: term.slaveFd,
        stderr: term.slaveFd,
        tty: true,
        beforeExec: spec.beforeExec,
      })
    } catch (error) {
      term.closeSlave()
      term.close()
      if (error instanceof SandboxStartError) throw new StartError(`failed to start container process: ${error.message}`)
      throw error
    } finally {
      term.closeSlave()
    }
    const {monitor, pid} = started
    const rawExit = sandboxExit(started)
    const log = new ContainerLogWriter(spec.logPath, spec.rotation)
    const proc = new ContainerProcess(
      pid,
      readStat(pid)?.startTime ?? 0,
      startedAt,
      rawExit,
      {stdout: term.output, stderr: Readable.from([])},
      log,
      spec.env,
      spec.cwd,
      outputPipes(spec.pipes),
      spec.stdin ? term.input : undefined,
      sandboxedProcess(sandbox),
      monitor.pid,
      spec.clock,
      spec.lookPeriodMs,
    )
    proc.terminal = term
    return proc
  }

  /** The container's terminal, when it runs on one (`tty: true`). */
  terminal: Pick<ContainerTerminal, 'resize'> | undefined

  /** Resizes the container's terminal (kubectl attach -t); nothing for a container without one. */
  resize(cols: number, rows: number): void {
    this.terminal?.resize(cols, rows)
  }

  /** The same instance in a pod sandbox (sandbox/spawn.ts): bwrap is vnode's child or its helper's (process/helper-runner.ts), the program its PID 1. */
  private static async startSandboxed(spec: SpawnSpec, sandbox: ContainerSandboxSpec): Promise<ContainerProcess> {
    const {pipes, readers, out, err, log, startedAt, abandon} = await openInstanceIO(spec)
    let started: Awaited<ReturnType<typeof spawnSandboxed>>
    try {
      started = await spawnSandboxed({argv: spec.argv, env: spec.env, cwd: spec.cwd, sandbox, stdin: spec.stdin ? 'pipe' : 'ignore', stdout: out, stderr: err, pipes, beforeExec: spec.beforeExec})
    } catch (error) {
      abandon()
      if (error instanceof SandboxStartError) throw new StartError(`failed to start container process: ${error.message}`)
      throw error
    } finally {
      closeSync(out)
      closeSync(err)
    }
    const {monitor, pid} = started
    // bwrap passes PID 1's status on: 128+n when a signal ended it, with no signal of its own, as a runtime reports it.
    const rawExit = sandboxExit(started)
    const ticks = readStat(pid)?.startTime ?? 0
    return new ContainerProcess(pid, ticks, startedAt, rawExit, readers, log, spec.env, spec.cwd, pipes, started.stdin, sandboxedProcess(sandbox), monitor.pid, spec.clock, spec.lookPeriodMs)
  }

  /**
   * Takes over a process a previous vnode started (same pid and start
   * time, checked by the caller): its output pipes are read again, and as
   * it is not our child its end is noticed by polling /proc, with an
   * unknown exit status.
   */
  static adopt(spec: AdoptSpec, pollMs = DefaultAdoptedPollMs): ContainerProcess {
    const readers = {stdout: openReaderOrEmpty(spec.pipes.stdout), stderr: openReaderOrEmpty(spec.pipes.stderr)}
    const log = new ContainerLogWriter(spec.logPath, spec.rotation)
    const rawExit = new Promise<RawExit>((resolve) => {
      const timer = setInterval(() => {
        const s = readStat(spec.pid)
        if (s && s.startTime === spec.startTicks && s.state !== 'Z' && s.state !== 'X') return
        clearInterval(timer)
        resolve({code: null, signal: null, unknown: true})
      }, pollMs)
    })
    return new ContainerProcess(spec.pid, spec.startTicks, spec.startedAt, rawExit, readers, log, spec.env, spec.cwd, spec.pipes, undefined, spec.sandboxed, spec.pgid)
  }

  /**
   * Resolves once a sandboxed instance can be entered: bwrap has set up its
   * namespaces and its PID 1 runs the container's program. Entered earlier,
   * nsenter would find a root still being built (exec, hooks and probes wait).
   */
  entered(): Promise<void> {
    if (!this.sandboxed) return Promise.resolve()
    return (this.enteredOnce ??= waitForProgram(this.pid, undefined, this.lookPeriodMs))
  }

  /** The argv prefix that runs a program in this container's namespaces; empty for a bare host process. */
  enterArgv(cwd: string, cgroupProcs: string[] = []): string[] {
    if (!this.sandboxed) return []
    const {netns, hostIPC, layerUserNamespace, identity} = this.sandboxed
    return [...enterArgv(this.pid, cwd, {network: netns, hostIPC, layerUserNamespaceOf: layerUserNamespace ? this.pgid : undefined}, cgroupProcs), ...(identity ?? [])]
  }

  /** The container's stdin pipe, when it was started with one and it is still open. */
  get stdin(): Writable | undefined {
    const s = this.stdinPipe
    return s && !s.destroyed && !s.writableEnded ? s : undefined
  }

  /** Closes the container's stdin (EOF), as after the first attach of a `stdinOnce` container. */
  closeStdin(): void {
    this.stdinPipe?.end()
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
    return this.exit === undefined || this.groupAlive()
  }

  /**
   * In a sandbox only PID 1 is signalled, as a runtime does: it may ignore
   * what it has no handler for, and SIGKILL of it ends its whole namespace.
   * A bare host process gets it for its whole process group.
   */
  signal(signal: NodeJS.Signals): void {
    if (!this.ownsGroup()) return
    if (!this.sandboxed) {
      signalGroup(this.pgid, signal)
      return
    }
    try {
      process.kill(this.pid, signal)
    } catch {
      /* gone */
    }
    // In a shared PID namespace its end does not end its children: they are its process group's.
    if (this.sandboxed.sharedPid && signal === 'SIGKILL') signalGroup(this.pgid, signal)
  }

  /**
   * Whether the process group is still ours: its leader is this process
   * (same start time) or gone. A group id cannot be reused while members
   * are left, but once they are all gone the pid may be given to a new
   * group leader (likely for an adopted process, which is not ours to reap),
   * and that group must never be signalled.
   */
  private ownsGroup(): boolean {
    if (!this.startTicks) return true
    const leader = readStat(this.pid)
    return !leader || leader.startTime === this.startTicks
  }

  private groupAlive(): boolean {
    if (this.sandboxed) return this.ownsGroup() && readStat(this.pid) !== undefined && !['Z', 'X'].includes(readStat(this.pid)!.state)
    return this.ownsGroup() && isGroupAlive(this.pgid)
  }

  /**
   * SIGTERM to the group, SIGKILL once `deadline()` (epoch ms, re-read on
   * every poll so it can move closer) has passed. Resolves once the main
   * process has exited and no process of the group is left.
   */
  async terminate(deadline: () => number, signal: AbortSignal | undefined = undefined): Promise<ExitInfo> {
    this.signal('SIGTERM')
    let killedAt = 0
    while (this.exit === undefined || this.groupAlive()) {
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
