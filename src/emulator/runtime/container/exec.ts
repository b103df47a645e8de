import {type ChildProcess, spawn} from 'node:child_process'
import {statSync} from 'node:fs'
import {constants} from 'node:os'
import type {Readable, Writable} from 'node:stream'
import type {StreamIO, TerminalSize} from '../../provider/streaming.js'
import {DefaultPipeDrainMs} from '../process/process-spec.js'
import {isGroupAlive, signalGroup} from '../process/proc.js'
import type {ContainerProcess} from '../process/container-process.js'
import {ExecStartError, resolveExecutable} from '../process/executable.js'

/**
 * `kubectl exec`: a command run as a new process in the container's
 * environment and working directory, from its argv (never through a
 * shell), in its own process group; with a pseudo-terminal for -t.
 */

/** With -t, how long to wait for the client's first terminal size before starting the command. */
export const DefaultFirstResizeWaitMs = 1_000
/** The terminal size until the client sends one (the kernel's default for a new pty). */
export const DefaultTerminalSize: TerminalSize = {width: 80, height: 24}

export interface ExecEnvironment {
  env: Record<string, string>
  /** In the container's view. */
  cwd: string
  /** A sandboxed container: the argv prefix that enters its namespaces, and where its view is seen from the host. */
  sandbox?: {enter: string[]; root: string}
}

/** An exit status as runtimes report it: 128 + the signal for a process killed by one. */
export function exitCodeOf(code: number | null | undefined, signal: NodeJS.Signals | number | null | undefined): number {
  if (typeof signal === 'string') return 128 + (constants.signals[signal] ?? 0)
  if (typeof signal === 'number' && signal > 0) return 128 + signal
  return code ?? 0
}

export interface ExecHandle {
  /** The process group (the command is its leader). */
  pgid: number
  /** Resolves when the command exited and its output is written (or abandoned after a drain timeout). */
  done: Promise<number>
}

/**
 * Starts argv in env; returns once it runs (throws ExecStartError when it
 * cannot). A client that goes away kills the command's process group.
 */
export async function startExec(argv: string[], where: ExecEnvironment, io: StreamIO): Promise<ExecHandle> {
  const [file, ...args] = argv
  if (!file) throw new ExecStartError('exec: no command')
  const root = where.sandbox?.root ?? ''
  try {
    if (!statSync(root + where.cwd).isDirectory()) throw new Error('not a directory')
  } catch {
    throw new ExecStartError(`chdir to cwd ("${where.cwd}") set in config.json failed: no such file or directory`)
  }
  const path = resolveExecutable(file, where.env, where.cwd, (p) => root + p)
  if (where.sandbox) {
    // nsenter runs it inside: the host side starts from / and the command keeps its exit status.
    const [enter, ...enterArgs] = where.sandbox.enter
    const inside = {...where, cwd: '/'}
    if (!io.tty) return startPiped(enter, [...enterArgs, path, ...args], inside, io)
    const terminal = insideTerminal([path, ...args], where.env)
    return startPty(enter, [...enterArgs, ...terminal.argv], {...inside, env: terminal.env}, io)
  }
  return io.tty ? startPty(path, args, where, io) : startPiped(path, args, where, io)
}

/** util-linux script: a pseudo-terminal of its own /dev/ptmx, the command its session leader, its exit status returned (-e). */
export const ScriptProgram = '/usr/bin/script'
/** Separates the command's arguments in ExecArgvEnv (a character no terminal command line carries). */
export const ExecArgvSeparator = '\x1f'
export const ExecArgvEnv = 'VNODE_EXEC_ARGV'
export const ExecShellEnv = 'VNODE_EXEC_SHELL'
/**
 * What script runs (through /bin/sh, as it runs any command): the argv
 * from the environment, split at the separator only (IFS, no globbing:
 * nothing of it is parsed as shell syntax), with the container's SHELL
 * put back.
 */
export const InsideTerminalScript = `IFS=$(printf '\\037'); set -f; a=$${ExecArgvEnv}; unset ${ExecArgvEnv}; if [ -n "$\{${ExecShellEnv}+x}" ]; then export SHELL="$${ExecShellEnv}"; fi; unset ${ExecShellEnv}; exec $a`

/**
 * \`kubectl exec -t\` in a sandbox: the terminal the client sees is the
 * host's, but the command gets one of the container's own /dev/pts (so
 * \`tty\` names it and the shell's job control works inside its PID
 * namespace), from script run inside the container; script relays the two
 * and passes window size changes on.
 */
export function insideTerminal(argv: string[], env: Record<string, string>): {argv: string[]; env: Record<string, string>} {
  if (argv.some((a) => a === '' || a.includes(ExecArgvSeparator))) throw new ExecStartError('exec: with a terminal, an argument may not be empty or contain the character 0x1f')
  const {SHELL: shell, ...rest} = env
  return {
    argv: [ScriptProgram, '-q', '-e', '-c', InsideTerminalScript, '/dev/null'],
    env: {...rest, [ExecArgvEnv]: argv.join(ExecArgvSeparator), ...(shell !== undefined ? {[ExecShellEnv]: shell} : {})},
  }
}

function copyOut(from: Readable | null, to: Writable | undefined): Promise<void> {
  if (!from) return Promise.resolve()
  return new Promise((resolve) => {
    if (to) from.pipe(to, {end: false})
    else from.resume()
    from.once('end', resolve)
    from.once('close', resolve)
    from.once('error', () => resolve())
  })
}

function feedStdin(from: Readable | undefined, to: Writable | null): () => void {
  if (!to) {
    from?.resume()
    return () => undefined
  }
  to.on('error', () => undefined)
  if (!from) {
    to.end()
    return () => undefined
  }
  from.pipe(to)
  // A stream that is reset never ends: the command then sees EOF all the same.
  const closed = () => to.end()
  from.once('close', closed)
  return () => {
    from.unpipe(to)
    from.off('close', closed)
  }
}

async function startPiped(path: string, args: string[], where: ExecEnvironment, io: StreamIO): Promise<ExecHandle> {
  const child: ChildProcess = spawn(path, args, {
    cwd: where.cwd,
    env: where.env,
    detached: true,
    stdio: [io.stdin ? 'pipe' : 'ignore', io.stdout ? 'pipe' : 'ignore', io.stderr ? 'pipe' : 'ignore'],
  })
  const spawned = await new Promise<true | Error>((resolve) => {
    child.once('spawn', () => resolve(true))
    child.once('error', (e) => resolve(e))
  })
  if (spawned !== true || child.pid === undefined) throw new ExecStartError(`exec: "${path}": ${spawned === true ? 'failed to start' : spawned.message}`)
  const pgid = child.pid
  const stopStdin = feedStdin(io.stdin, child.stdin)
  const kill = () => signalGroup(pgid, 'SIGKILL')
  io.signal.addEventListener('abort', kill, {once: true})
  const output = Promise.all([copyOut(child.stdout, io.stdout), copyOut(child.stderr, io.stderr)])
  const done = new Promise<number>((resolve) => {
    child.once('exit', (code, signal) => {
      const exitCode = exitCodeOf(code, signal)
      // Output may be held open by a background process the command left: wait a little, then let go.
      const timer = setTimeout(() => {
        child.stdout?.destroy()
        child.stderr?.destroy()
      }, DefaultPipeDrainMs)
      void output.then(() => {
        clearTimeout(timer)
        stopStdin()
        child.stdin?.destroy()
        io.signal.removeEventListener('abort', kill)
        resolve(exitCode)
      })
    })
  })
  return {pgid, done}
}

function waitFirstSize(io: StreamIO): Promise<TerminalSize | undefined> {
  const resize = io.resize
  if (!resize || resize.last) return Promise.resolve(resize?.last)
  return new Promise((resolve) => {
    const done = (size?: TerminalSize) => {
      clearTimeout(timer)
      resize.off('resize', done)
      io.signal.removeEventListener('abort', aborted)
      resolve(size)
    }
    const aborted = () => done()
    const timer = setTimeout(done, DefaultFirstResizeWaitMs)
    resize.on('resize', done)
    io.signal.addEventListener('abort', aborted, {once: true})
  })
}

async function startPty(path: string, args: string[], where: ExecEnvironment, io: StreamIO): Promise<ExecHandle> {
  const {spawn: spawnPty} = await import('@lydell/node-pty')
  const first = (await waitFirstSize(io)) ?? DefaultTerminalSize
  // Runtimes set TERM for a terminal when the container does not.
  const env = {TERM: 'xterm', ...where.env}
  let pty
  try {
    pty = spawnPty(path, args, {name: env.TERM, cols: first.width || DefaultTerminalSize.width, rows: first.height || DefaultTerminalSize.height, cwd: where.cwd, env, encoding: null})
  } catch (error) {
    throw new ExecStartError(`exec: "${path}": ${(error as Error).message}`)
  }
  const term = pty
  const pgid = term.pid
  const onData = term.onData((d: string | Buffer) => {
    io.stdout?.write(d)
  })
  const onInput = (d: Buffer) => term.write(d as unknown as string)
  io.stdin?.on('data', onInput)
  const onResize = (s: TerminalSize) => {
    if (s.width > 0 && s.height > 0) term.resize(s.width, s.height)
  }
  io.resize?.on('resize', onResize)
  const kill = () => signalGroup(pgid, 'SIGKILL')
  io.signal.addEventListener('abort', kill, {once: true})
  const done = new Promise<number>((resolve) => {
    const onExit = term.onExit(({exitCode, signal}) => {
      onData.dispose()
      onExit.dispose()
      io.stdin?.off('data', onInput)
      io.resize?.off('resize', onResize)
      io.signal.removeEventListener('abort', kill)
      // What the session leader left behind loses its terminal, as on a hangup.
      signalGroup(pgid, 'SIGHUP')
      resolve(exitCodeOf(exitCode, signal))
    })
  })
  return {pgid, done}
}

/** Process groups of exec'd commands by container instance: they die with it, as in its PID namespace. */
export class ExecGroups {
  private readonly byInstance = new Map<ContainerProcess, Set<number>>()

  /** Remembers an exec's group until the container instance exits, then kills what is left of it. */
  track(proc: ContainerProcess, pgid: number): void {
    let groups = this.byInstance.get(proc)
    if (!groups) {
      const set = new Set<number>()
      this.byInstance.set(proc, (groups = set))
      void proc.exited.then(() => {
        for (const g of set) signalGroup(g, 'SIGKILL')
        this.byInstance.delete(proc)
      })
    }
    for (const g of groups) if (!isGroupAlive(g)) groups.delete(g)
    groups.add(pgid)
  }

  /** The exec is over: its group is forgotten once nothing of it is left. */
  ended(proc: ContainerProcess, pgid: number): void {
    if (!isGroupAlive(pgid)) this.byInstance.get(proc)?.delete(pgid)
  }

  /** The runtime closes: every exec'd group still there is killed. */
  killAll(): void {
    for (const groups of this.byInstance.values()) for (const g of groups) signalGroup(g, 'SIGKILL')
    this.byInstance.clear()
  }
}
