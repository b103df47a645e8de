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
import {readStat, signalGroup} from './proc.js'
import type {ContainerSandboxSpec} from '../sandbox/spec.js'
import {SandboxStartError, spawnSandboxed} from '../sandbox/spawn.js'
import {placedArgv} from './placed-argv.js'
import {helpers} from './helper-runner.js'
import {openInstanceIO, outputPipes, type OutputPipes} from './instance-io.js'
import type {RawExit, SandboxedProcess, SpawnSpec} from './process-spec.js'
import {monitorExit, sandboxedProcess, sandboxExit} from './sandboxed-start.js'

/**
 * The ways a container instance starts (the CRI's StartContainer, one per
 * kind of instance): a bare one by the node's helper, or by vnode's own
 * spawn when it has stdin; on a terminal; in its pod sandbox, on a terminal
 * or not. Each ends with what the instance is made of (InstanceParts), from
 * which container-process.ts builds the instance; adoption builds the same
 * parts from a record.
 */

/** What a started (or adopted) instance is made of. */
export interface InstanceParts {
  pid: number
  /** Clock ticks after boot, from /proc: identifies this process across pid reuse. */
  startTicks: number
  startedAt: Date
  rawExit: Promise<RawExit>
  streams: {stdout: Readable; stderr: Readable}
  log: ContainerLogWriter
  /** What it was started with: hooks run in the same environment and directory. */
  env: Record<string, string>
  cwd: string
  pipes: OutputPipes
  /** The container's stdin (attach), when it was started with one; never for an adopted process. */
  stdin?: Writable
  /** In a sandbox: pid is PID 1 of its PID namespace, signalled alone; ending it ends the namespace. */
  sandboxed?: SandboxedProcess
  /** The process group of the instance: bwrap's in a sandbox (its PID 1 is a member), else the main process's own. */
  groupId?: number
  clock?: Clock
  /** A sandboxed start's look period for its program (SpawnSpec.lookPeriodMs). */
  lookPeriodMs?: number
  /** The terminal it runs on (`tty: true`). */
  terminal?: Pick<ContainerTerminal, 'resize'>
}

/** Starts one instance of spec, or fails with a StartError in runc's words. */
export async function startInstance(spec: SpawnSpec): Promise<InstanceParts> {
  const [file, ...args] = spec.argv
  if (!file) throw new StartError('failed to start container process: no command to run')
  if (spec.sandbox) return spec.tty ? startSandboxedOnTerminal(spec, spec.sandbox) : startSandboxed(spec, spec.sandbox)
  try {
    if (!(await stat(spec.cwd)).isDirectory()) throw new Error('not a directory')
  } catch {
    throw new StartError(`failed to start container process: chdir to cwd ("${spec.cwd}") set in config.json failed: no such file or directory`)
  }
  if (spec.tty) return startOnTerminal(spec, file, args)
  if (!spec.stdin && helpers.canSpawn) return startFromHelper(spec, file, args)
  return startByVnode(spec, file, args)
}

/**
 * A bare instance's step between its spawn and its program's work (its cgroups, unless it placed itself): when it
 * fails, the instance's group is killed and waited for, what its start made is undone, and the start fails.
 */
async function placeOrUndo(spec: SpawnSpec, pid: number, placed: boolean, exited: Promise<unknown>, undo: () => void): Promise<void> {
  try {
    if (!placed) await spec.place?.(pid)
  } catch (error) {
    signalGroup(pid, 'SIGKILL')
    await exited
    undo()
    throw new StartError(`failed to start container process: ${(error as Error).message}`)
  }
}

/** A bare instance with stdin (or without the helper): vnode's own child, by execa. */
async function startByVnode(spec: SpawnSpec, file: string, args: string[]): Promise<InstanceParts> {
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
  return bareParts(spec, child.pid, startedAt, rawExit, readers, log, pipes, child.stdin ?? undefined)
}

/**
 * A bare instance without stdin, started by the helper (process/helper-runner.ts): libuv forks vnode whole for a
 * spawn and holds its event loop until the child execs, about 4 ms a start at vnode's size, which in a burst of
 * starts was a quarter of the event loop's work.
 */
async function startFromHelper(spec: SpawnSpec, file: string, args: string[]): Promise<InstanceParts> {
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
  return bareParts(spec, pid, startedAt, rawExit, readers, log, pipes)
}

/** The parts of a bare instance (its own process group). */
function bareParts(
  spec: SpawnSpec,
  pid: number,
  startedAt: Date,
  rawExit: Promise<RawExit>,
  streams: InstanceParts['streams'],
  log: ContainerLogWriter,
  pipes: OutputPipes,
  stdin?: Writable,
): InstanceParts {
  return {pid, startTicks: readStat(pid)?.startTime ?? 0, startedAt, rawExit, streams, log, env: spec.env, cwd: spec.cwd, pipes, stdin, clock: spec.clock}
}

/** A `tty: true` instance (container-tty.ts): one output, the terminal's, logged as stdout. */
async function startOnTerminal(spec: SpawnSpec, file: string, args: string[]): Promise<InstanceParts> {
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
  return {
    ...terminalParts(spec, term),
    pid: term.pid,
    startTicks: readStat(term.pid)?.startTime ?? 0,
    startedAt,
    rawExit: term.exited,
  }
}

/** What an instance on a terminal has of it: one output, logged as stdout; stdin when the container has one. */
function terminalParts(
  spec: SpawnSpec,
  term: Pick<ContainerTerminal, 'output' | 'input' | 'resize'>,
): Pick<InstanceParts, 'streams' | 'log' | 'env' | 'cwd' | 'pipes' | 'stdin' | 'clock' | 'terminal'> {
  return {
    streams: {stdout: term.output, stderr: Readable.from([])},
    log: new ContainerLogWriter(spec.logPath, spec.rotation),
    env: spec.env,
    cwd: spec.cwd,
    pipes: outputPipes(spec.pipes),
    stdin: spec.stdin ? term.input : undefined,
    clock: spec.clock,
    terminal: term,
  }
}

/** A `tty: true` instance in a pod sandbox: bwrap's PID 1 on the slave side of a terminal vnode opened. */
async function startSandboxedOnTerminal(spec: SpawnSpec, sandbox: ContainerSandboxSpec): Promise<InstanceParts> {
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
      cgroupProcs: spec.cgroupProcs,
      place: spec.place,
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
  return {
    ...terminalParts(spec, term),
    pid,
    startTicks: readStat(pid)?.startTime ?? 0,
    startedAt,
    rawExit: sandboxExit(started),
    sandboxed: sandboxedProcess(sandbox),
    groupId: monitor.pid,
    lookPeriodMs: spec.lookPeriodMs,
  }
}

/** The same instance in a pod sandbox (sandbox/spawn.ts): bwrap is vnode's child or its helper's (process/helper-runner.ts), the program its PID 1. */
async function startSandboxed(spec: SpawnSpec, sandbox: ContainerSandboxSpec): Promise<InstanceParts> {
  const {pipes, readers, out, err, log, startedAt, abandon} = await openInstanceIO(spec)
  let started: Awaited<ReturnType<typeof spawnSandboxed>>
  try {
    started = await spawnSandboxed({
      argv: spec.argv,
      env: spec.env,
      cwd: spec.cwd,
      sandbox,
      stdin: spec.stdin ? 'pipe' : 'ignore',
      stdout: out,
      stderr: err,
      pipes,
      cgroupProcs: spec.cgroupProcs,
      place: spec.place,
    })
  } catch (error) {
    abandon()
    if (error instanceof SandboxStartError) throw new StartError(`failed to start container process: ${error.message}`)
    throw error
  } finally {
    closeSync(out)
    closeSync(err)
  }
  const {monitor, pid} = started
  return {
    pid,
    startTicks: readStat(pid)?.startTime ?? 0,
    startedAt,
    // bwrap passes PID 1's status on: 128+n when a signal ended it, with no signal of its own, as a runtime reports it.
    rawExit: sandboxExit(started),
    streams: readers,
    log,
    env: spec.env,
    cwd: spec.cwd,
    pipes,
    stdin: started.stdin,
    sandboxed: sandboxedProcess(sandbox),
    groupId: monitor.pid,
    clock: spec.clock,
    lookPeriodMs: spec.lookPeriodMs,
  }
}
