import {closeSync, readdirSync, readlinkSync} from 'node:fs'
import {PassThrough, Writable, type Readable} from 'node:stream'
import {signalName} from '../process/proc.js'

/**
 * A `tty: true` container's terminal: its main process is started on a
 * pseudo-terminal (node-pty, as `kubectl exec -t`), session leader of its
 * own session and process group. Its one output is the terminal's, copied
 * to the CRI log as stdout (as the container runtimes log a tty, carriage
 * returns included); input (`stdin: true`) is typed into the terminal;
 * `kubectl attach` resizes it. vnode holds the terminal's master side, so
 * unlike a piped container a tty container does not outlive vnode: its
 * session gets SIGHUP, as when a shim holding a terminal dies.
 */

/** The terminal size before a client sends one (the kernel's default for a new pty). */
export const DefaultContainerTerminal = {cols: 80, rows: 24}

export interface TerminalExit {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface ContainerTerminal {
  pid: number
  /** What the program writes to the terminal. */
  output: Readable
  /** Typed into the terminal. */
  input: Writable
  exited: Promise<TerminalExit>
  resize(cols: number, rows: number): void
}

/** Starts file+args on a new pseudo-terminal; throws with the spawn's error when it cannot. */
export async function spawnOnTerminal(file: string, args: string[], env: Record<string, string>, cwd: string): Promise<ContainerTerminal> {
  const {spawn} = await import('@lydell/node-pty')
  const term = spawn(file, args, {name: env.TERM ?? 'xterm', ...DefaultContainerTerminal, cwd, env, encoding: null})
  const output = new PassThrough()
  const data = term.onData((d: string | Buffer) => output.write(d))
  let closed = false
  const input = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!closed) term.write(chunk as unknown as string)
      done()
    },
  })
  const exited = new Promise<TerminalExit>((resolve) => {
    const sub = term.onExit(({exitCode, signal}) => {
      sub.dispose()
      data.dispose()
      closed = true
      output.end()
      resolve(signal ? {code: null, signal: signalName(signal) ?? 'SIGKILL'} : {code: exitCode, signal: null})
    })
  })
  return {
    pid: term.pid,
    output,
    input,
    exited,
    resize: (cols, rows) => {
      if (!closed && cols > 0 && rows > 0) term.resize(cols, rows)
    },
  }
}

/** A terminal with no process yet: the program is started on its slave side by the caller (a sandbox's bwrap). */
export interface OpenTerminal {
  /** The slave side, for the child's stdin, stdout and stderr; closed by close() once the child has it. */
  slaveFd: number
  output: Readable
  input: Writable
  resize(cols: number, rows: number): void
  /** Drops vnode's copy of the slave side: the output ends once the program's copies are gone. */
  closeSlave(): void
  /** Closes the terminal (the program could not be started). */
  close(): void
}

interface UnixTerminalLike {
  _fd: number
  _pty: string
  _master: Readable & {write(d: Buffer): boolean}
  _slave: Readable & {_handle?: {fd: number}}
  resize(cols: number, rows: number): void
}

/**
 * openpty(3) through node-pty's own binding (its UnixTerminal.open): the
 * sandbox starts its PID 1 on the slave side, under `setsid -c` so the
 * terminal becomes its controlling terminal (job control, ^C).
 */
export async function openTerminal(): Promise<OpenTerminal> {
  const {createRequire} = await import('node:module')
  const require = createRequire(import.meta.url)
  const {UnixTerminal} = require('@lydell/node-pty/unixTerminal.js') as {UnixTerminal: {open(o: {cols: number; rows: number; encoding: null}): UnixTerminalLike}}
  const t = UnixTerminal.open({...DefaultContainerTerminal, encoding: null})
  const slaveFd = t._slave._handle?.fd
  if (slaveFd === undefined) throw new Error('no pseudo-terminal could be opened')
  t._slave.pause()
  const output = new PassThrough()
  let closed = false
  t._master.on('data', (d: Buffer) => output.write(d))
  // EIO once every holder of the slave side is gone: the terminal's output has ended.
  const end = () => {
    if (closed) return
    closed = true
    output.end()
    t._master.destroy()
  }
  t._master.on('error', end)
  t._master.on('end', end)
  t._master.on('close', end)
  const input = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!closed) t._master.write(chunk)
      done()
    },
  })
  return {
    slaveFd,
    output,
    input,
    resize: (cols, rows) => {
      if (!closed && cols > 0 && rows > 0) t.resize(cols, rows)
    },
    closeSlave: () => {
      t._slave.destroy()
      closeAllOf(t._pty)
    },
    close: end,
  }
}

/** Closes every descriptor of this process open on that device (the binding's own slave fd is not kept anywhere). */
function closeAllOf(device: string): void {
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === device) closeSync(Number(fd))
    } catch {
      /* already closed, or the directory's own fd */
    }
  }
}

/** The argv prefix that makes the terminal on stdin the program's controlling terminal (util-linux setsid). */
export const ControllingTerminalPrefix = ['setsid', '--ctty']
