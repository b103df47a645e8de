import type {Emulator, EmulatorOptions} from '../emulator/emulator.js'
import {join} from 'node:path'

/** Attaches a renderer to the running nodes; returns the function that detaches it. */
export type Renderer = (emulators: Emulator[], stop: () => void) => Promise<() => void>

/**
 * The options of node i of `up --nodes N`: one name, state dir and kubelet
 * port each (`<name>-<i>`, `<state-dir>/<name>-<i>`, any free port), all else
 * shared. One node keeps the options as given.
 */
export function nodeOptions(base: EmulatorOptions, count: number): EmulatorOptions[] {
  if (count <= 1) return [base]
  return Array.from({length: count}, (_, i) => {
    const name = `${base.name}-${i}`
    return {...base, name, stateDir: base.stateDir ? join(base.stateDir, name) : undefined, port: 0}
  })
}

/**
 * Runs the nodes in the foreground until SIGINT/SIGTERM/SIGHUP (or the renderer's
 * quit), then stops them all, each terminating its pods. A second signal
 * exits at once. SIGUSR2 prints a `stats` line per node (benchmarks, leak checks).
 */
export async function runNodes(options: EmulatorOptions[], opts: {rm: boolean; render: Renderer}): Promise<void> {
  const {Emulator} = await import('../emulator/emulator.js')
  const emulators = options.map((o) => new Emulator(o))
  let stopping: Promise<unknown> | undefined
  let stopped!: () => void
  const stopRequested = new Promise<void>((resolve) => (stopped = resolve))
  const stop = () => {
    if (stopping) {
      process.stderr.write('error: interrupted again, exiting without finishing the shutdown\n')
      process.exit(1)
    }
    stopping = Promise.all(emulators.map((e) => e.stop({rm: opts.rm})))
    stopped()
  }
  // The terminal went away (its window closed, its tmux session killed): stop as for SIGTERM, once.
  // Its reads and writes fail (EIO, EPIPE), often before SIGHUP arrives: the same hangup, and not an
  // uncaught error that would end the process before its pods are stopped. Meanwhile this is the only
  // error listener on stdio (oclif's rethrows all but EPIPE); the others come back afterwards.
  let hungUp = false
  const hangup = () => {
    hungUp = true
    if (!stopping) stop()
  }
  const terminalGone = (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EIO' && error.code !== 'EPIPE') throw error
    hangup()
  }
  const stdio = [process.stdin, process.stdout, process.stderr].map((stream) => ({stream, others: stream.listeners('error') as ((e: Error) => void)[]}))
  for (const {stream} of stdio) stream.removeAllListeners('error').on('error', terminalGone)
  const stats = () => emulators.forEach((e) => e.reportStats())
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  process.on('SIGHUP', hangup)
  process.on('SIGUSR2', stats)
  const detach = await opts.render(emulators, stop)
  try {
    await Promise.all(emulators.map((e) => e.start()))
    await stopRequested
    await stopping
  } catch (error) {
    await Promise.all(emulators.map((e) => e.stop({rm: opts.rm}).catch(() => undefined)))
    throw error
  } finally {
    detach()
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
    process.off('SIGHUP', hangup)
    // After a hangup the last writes (the dashboard's unmount) still fail, after this returns; and the
    // terminal's stdin would keep the process alive with nothing to read.
    if (hungUp) process.stdin.destroy()
    else {
      for (const {stream, others} of stdio) {
        stream.off('error', terminalGone)
        for (const l of others) stream.on('error', l)
      }
    }
    process.off('SIGUSR2', stats)
  }
}
