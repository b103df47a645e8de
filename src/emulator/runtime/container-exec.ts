import {type ChildProcess, spawn} from 'node:child_process'
import {accessSync, constants as fsc, statSync} from 'node:fs'
import {constants} from 'node:os'
import {delimiter, isAbsolute, join, resolve} from 'node:path'
import type {Readable, Writable} from 'node:stream'
import type {StreamIO, TerminalSize} from '../provider/streaming.js'
import {DefaultPipeDrainMs} from './container-process.js'
import {signalGroup} from './proc.js'

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

/** A command that could not be started (runc's "exec failed" cases). */
export class ExecStartError extends Error {}

/** The executable as execvp would find it: a path with a '/' is taken as is (relative to cwd), otherwise the env's PATH. */
export function resolveExecutable(file: string, env: Record<string, string>, cwd: string, toHost: (path: string) => string | undefined = (p) => p): string {
  const candidates = file.includes('/')
    ? [isAbsolute(file) ? file : resolve(cwd, file)]
    : (env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(isAbsolute(d) ? d : resolve(cwd, d), file))
  let denied = false
  for (const path of candidates) {
    const host = toHost(path)
    // Where the host has no counterpart (a sandbox's own /dev or /proc), only the exec can tell.
    if (host === undefined) return path
    try {
      if (!statSync(host).isFile()) continue
      accessSync(host, fsc.X_OK)
      return path
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true
    }
  }
  if (denied) throw new ExecStartError(`exec: "${file}": permission denied`)
  if (file.includes('/')) throw new ExecStartError(`exec: "${file}": stat ${file}: no such file or directory`)
  throw new ExecStartError(`exec: "${file}": executable file not found in $PATH`)
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
    return io.tty ? startPty(enter, [...enterArgs, path, ...args], inside, io) : startPiped(enter, [...enterArgs, path, ...args], inside, io)
  }
  return io.tty ? startPty(path, args, where, io) : startPiped(path, args, where, io)
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
