import {RealClock, type Clock} from '../../../common/clock.js'
import type {Writable} from 'node:stream'
import {ContainerLogWriter} from '../logs/writer.js'
import {DefaultAdoptedPollMs, isGroupAlive, isLiveProcess, readStat, signalGroup} from './proc.js'
import {enterArgv} from '../sandbox/spawn.js'
import {openReaderOrEmpty, removePipes, type OutputPipes} from './instance-io.js'
import {startInstance, type InstanceParts} from './instance-starts.js'
import {DefaultKillPollMs, DefaultKillWaitMs, DefaultPipeDrainMs, exitInfo} from './process-spec.js'
import type {AdoptSpec, ExitInfo, OutputListener, OutputStream, RawExit, SandboxedProcess, SpawnSpec} from './process-spec.js'
import {waitForProgram} from './sandboxed-start.js'

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

  readonly pid: number
  /** Clock ticks after boot, from /proc: identifies this process across pid reuse. */
  readonly startTicks: number
  readonly startedAt: Date
  /** What it was started with: hooks run in the same environment and directory. */
  readonly env: Record<string, string>
  readonly cwd: string
  readonly pipes: OutputPipes
  /** In a sandbox: pid is PID 1 of its PID namespace, signalled alone; ending it ends the namespace. */
  readonly sandboxed?: SandboxedProcess
  /** The container's terminal, when it runs on one (`tty: true`). */
  readonly terminal: InstanceParts['terminal']
  /** The container's stdin (attach), when it was started with one; never for an adopted process. */
  private readonly stdinPipe?: Writable
  /** The process group of the instance: bwrap's in a sandbox (its PID 1 is a member), else the main process's own. */
  private readonly groupId?: number
  private readonly clock: Clock
  /** A sandboxed start's look period for its program (SpawnSpec.lookPeriodMs). */
  private readonly lookPeriodMs?: number

  private constructor(parts: InstanceParts) {
    const {rawExit, streams, log, stdin: stdinPipe, pipes} = parts
    this.pid = parts.pid
    this.startTicks = parts.startTicks
    this.startedAt = parts.startedAt
    this.env = parts.env
    this.cwd = parts.cwd
    this.pipes = pipes
    this.sandboxed = parts.sandboxed
    this.terminal = parts.terminal
    this.stdinPipe = stdinPipe
    this.groupId = parts.groupId
    this.clock = parts.clock ?? RealClock
    this.lookPeriodMs = parts.lookPeriodMs
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

  /**
   * The main process still runs, asked of /proc now (same pid, same start, not a zombie): its exit reaches vnode a
   * moment after it is reaped (the helper reports it over a pipe, vnode's own children through libuv), and a stop in
   * that moment must not treat it as running.
   */
  runsNow(): boolean {
    return this.running && isLiveProcess(this.pid, this.startTicks)
  }

  get pgid(): number {
    return this.groupId ?? this.pid
  }

  /** Starts an instance of spec (instance-starts.ts), or fails with a StartError in runc's words. */
  static async start(spec: SpawnSpec): Promise<ContainerProcess> {
    return new ContainerProcess(await startInstance(spec))
  }

  /** Resizes the container's terminal (kubectl attach -t); nothing for a container without one. */
  resize(cols: number, rows: number): void {
    this.terminal?.resize(cols, rows)
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
        if (isLiveProcess(spec.pid, spec.startTicks)) return
        clearInterval(timer)
        resolve({code: null, signal: null, unknown: true})
      }, pollMs)
    })
    return new ContainerProcess({
      pid: spec.pid,
      startTicks: spec.startTicks,
      startedAt: spec.startedAt,
      rawExit,
      streams: readers,
      log,
      env: spec.env,
      cwd: spec.cwd,
      pipes: spec.pipes,
      sandboxed: spec.sandboxed,
      groupId: spec.pgid,
    })
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
