import {constants} from 'node:os'
import {PassThrough, Writable, type Readable} from 'node:stream'

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

const signalNames = new Map<number, NodeJS.Signals>(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]))

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
      resolve(signal ? {code: null, signal: signalNames.get(signal) ?? 'SIGKILL'} : {code: exitCode, signal: null})
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
