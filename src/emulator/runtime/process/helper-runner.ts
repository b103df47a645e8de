import {spawn, type ChildProcess} from 'node:child_process'
import {execa} from 'execa'
import {hostProgram, PerlProgram} from './host-programs.js'
import {constants as osConstants} from 'node:os'
import {HelperMonitor, watchOrphan, type HelperBareSpawn, type HelperSpawn} from './helper-monitor.js'
import {HelperScript} from './helper-script.js'
import {signalName} from './proc.js'

export {HelperMonitor, type HelperBareSpawn, type HelperSpawn, type SandboxMonitor} from './helper-monitor.js'
export {HelperScript} from './helper-script.js'

/**
 * Runs the runtime's short helper programs (the CNI plugins on a pod's
 * network and its pool's, the network namespaces' `ip` batches, the output
 * pipes' `mkfifo`) from a small perl process, so that vnode does not fork
 * itself for each: libuv forks vnode whole and holds its event loop
 * until the child execs, about 5 ms a program at vnode's size, and a burst of
 * pod deletions runs a plugin per pod. perl forks at a few MiB.
 *
 * Each run is a line on the helper's stdin, its answer a line on its stdout
 * (hex fields: nothing in them is parsed by a shell or split on a space).
 * The helper starts at the first run and is told to go (its stdin closed)
 * once no run has been asked for DefaultHelperIdleMs, and with vnode: it
 * finishes the runs under way, then exits; it is never a node's leftover.
 * Without perl, or once the helper failed to start, execa runs them.
 */

/** The helper's one argument (the script ignores it): what `ps` shows of it, and how a node's helper is found among its children. */
export const HelperName = 'vnode-helper'

/** How long the helper stays after its last run. */
export const DefaultHelperIdleMs = 10_000
/** Inputs larger than this go through execa (the helper writes an input whole, before it reads the outputs). */
export const MaxHelperInputBytes = 32_768

export interface HelperRun {
  env: Record<string, string>
  input?: string
  timeoutMs: number
}

export interface HelperResult {
  /** undefined when a signal ended it (or it could not be run: see stderr). */
  exitCode: number | undefined
  stdout: string
  stderr: string
  timedOut: boolean
}

const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex')
const unhex = (s: string) => Buffer.from(s, 'hex').toString('utf8')
const envFields = (env: Record<string, string>) => Object.entries(env).map(([k, v]) => `${k}=${v}`)

export class HelperRunner {
  private child?: ChildProcess
  private nextId = 1
  /** Runs asked for and not answered yet: the helper each went to, and its caller. */
  private readonly waiting = new Map<string, {child: ChildProcess; resolve: (r: HelperResult) => void}>()
  /** Monitors started and not exited: the helper each belongs to, and whether it keeps vnode running. */
  private readonly monitors = new Map<string, {child: ChildProcess; monitor: HelperMonitor; started: (m: HelperMonitor | Error) => void; held: boolean}>()
  private idle?: NodeJS.Timeout
  private failed = false
  /** close() was asked for while monitors ran. */
  private closing = false
  /** Runs answered by the helper (the rest went through execa). */
  helperRuns = 0

  constructor(private readonly idleMs = DefaultHelperIdleMs) {}

  /** Whether spawns can go through the helper (perl is there and the helper has not failed to start). */
  get canSpawn(): boolean {
    return !this.failed && hostProgram(PerlProgram).startsWith('/')
  }

  /** Runs `file` with exactly `env`, `input` on its stdin; never throws for the program's failure. */
  async run(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
    const input = opts.input ?? ''
    const child = Buffer.byteLength(input) <= MaxHelperInputBytes ? this.helper() : undefined
    if (!child) return runDirectly(file, args, opts)
    const id = String(this.nextId++)
    clearTimeout(this.idle)
    return new Promise<HelperResult>((resolve) => {
      this.waiting.set(id, {child, resolve})
      this.holdOpen(child, true)
      this.write(child, ['run', id, String(opts.timeoutMs), file, input, String(args.length), ...args, ...envFields(opts.env)])
    })
  }

  /** Starts a sandbox's monitor from the helper; rejects when it cannot be started (the reason). */
  spawn(s: HelperSpawn): Promise<HelperMonitor> {
    const [argv, script] = s.script ? [s.script.args, s.script.source] : [s.argv, '']
    return this.start((id) => ['spawn', id, s.stdout, s.stderr, s.pidns ?? '', (s.cgroupProcs ?? []).join('\0'), script, String(argv.length), ...argv, ...envFields(s.env)])
  }

  /**
   * Starts a bare container process from the helper (vnode does not fork itself for it); resolves once its program
   * runs, rejects when its chdir or exec failed, with the errno's code (ENOENT, EACCES, ...) on the error.
   */
  spawnBare(s: HelperBareSpawn): Promise<HelperMonitor> {
    return this.start((id) => ['bare', id, s.stdout, s.stderr, s.cwd, String(s.argv.length), ...s.argv, ...envFields(s.env)])
  }

  private start(request: (id: string) => string[]): Promise<HelperMonitor> {
    const child = this.helper()
    if (!child) return Promise.reject(new Error('no helper'))
    const id = String(this.nextId++)
    clearTimeout(this.idle)
    return new Promise<HelperMonitor>((resolve, reject) => {
      const monitor = new HelperMonitor(
        id,
        (m) => this.unhold(m),
        (fields) => this.write(child, fields),
      )
      this.monitors.set(id, {child, monitor, held: true, started: (m) => (m instanceof Error ? reject(m) : resolve(m))})
      this.holdOpen(child, true)
      this.write(child, request(id))
    })
  }

  /**
   * Lets the helper go: at once when it has no monitor (it finishes the
   * runs under way, then exits), else once its last monitor has exited (its
   * stdin's end lets monitors still held at their block fd run, as vnode's
   * own end does).
   */
  close(): void {
    clearTimeout(this.idle)
    if (this.monitors.size > 0) {
      this.closing = true
      return
    }
    this.closing = false
    this.child?.stdin?.end()
    this.child = undefined
  }

  /** The helper's pid while it runs (tests). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  private write(child: ChildProcess, fields: string[]): void {
    child.stdin!.write(fields.map(hex).join(' ') + '\n')
  }

  private helper(): ChildProcess | undefined {
    if (this.child) return this.child
    if (!this.canSpawn) return undefined
    // A session of its own: a terminal's ^C or hangup is vnode's to act on (it stops its pods, whose exits the helper reports).
    const child = spawn(hostProgram(PerlProgram), ['-e', HelperScript, HelperName], {
      stdio: ['pipe', 'pipe', 'ignore'],
      env: {PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'},
      detached: true,
    })
    this.child = child
    child.stdout!.setEncoding('utf8')
    // Each helper's answers are lines of its own stdout (a closed helper may still be answering beside a new one).
    const answers = {text: ''}
    child.stdout!.on('data', (chunk: string) => this.read(answers, chunk))
    child.stdin!.on('error', () => undefined)
    child.once('error', () => (this.failed = true))
    child.once('exit', () => this.gone(child))
    ;(child.stdin as unknown as {unref?: () => void}).unref?.()
    this.holdOpen(child, false)
    return child
  }

  /** Whether anything under way keeps vnode running: a run, a spawn not answered yet, a monitor not unref'd. */
  private get holding(): boolean {
    return this.waiting.size > 0 || [...this.monitors.values()].some((m) => m.held)
  }

  private unhold(m: HelperMonitor): void {
    const entry = this.monitors.get(m.id)
    if (entry) entry.held = false
    this.settle()
  }

  /** An idle helper does not keep vnode running (a node that is done exits, and the helper with it: its stdin closes); one with work under way does. */
  private holdOpen(child: ChildProcess, hold: boolean): void {
    const out = child.stdout as unknown as {ref?: () => void; unref?: () => void}
    if (hold) {
      child.ref()
      out.ref?.()
    } else {
      child.unref()
      out.unref?.()
    }
  }

  private read(answers: {text: string}, chunk: string): void {
    answers.text += chunk
    let nl: number
    while ((nl = answers.text.indexOf('\n')) >= 0) {
      const [kind = '', id = '', ...f] = answers.text.slice(0, nl).split(' ').map(unhex)
      answers.text = answers.text.slice(nl + 1)
      if (kind === 'ran') this.ran(id, f)
      else this.monitorSaid(kind, id, f)
    }
    this.settle()
  }

  private ran(id: string, [code = '', signal = '', timedOut = '', stdout = '', stderr = '']: string[]): void {
    const resolve = this.waiting.get(id)?.resolve
    this.waiting.delete(id)
    this.helperRuns++
    const exit = Number(code)
    const killed = exit < 0 && !stderr ? `killed by ${signalName(Number(signal)) ?? `signal ${signal}`}` : stderr
    resolve?.({exitCode: exit < 0 ? undefined : exit, stdout, stderr: killed, timedOut: timedOut === '1'})
  }

  private monitorSaid(kind: string, id: string, [first = '', second = '', third = '']: string[]): void {
    const entry = this.monitors.get(id)
    if (!entry) return
    const m = entry.monitor
    if (kind === 'pid') {
      m.pid = Number(first)
      entry.started(m)
    } else if (kind === 'failed') {
      this.monitors.delete(id)
      entry.started(Object.assign(new Error(first), {code: errnoCode(Number(second))}))
    } else if (kind === 'placed') m.placedAnswer(first ? {file: first, code: errnoCode(Number(second)) ?? `errno ${second}`, pid: third} : undefined)
    else if (kind === 'status') m.status.write(first)
    else if (kind === 'closed') m.status.end()
    else if (kind === 'exit') {
      this.monitors.delete(id)
      const code = Number(first)
      m.status.end()
      m.ended(code < 0 ? null : code, code < 0 ? (signalName(Number(second)) ?? null) : null)
    }
  }

  /** Nothing under way: the helper no longer keeps vnode running, and goes once idle long enough. */
  private settle(): void {
    if (this.holding || !this.child) return
    this.holdOpen(this.child, false)
    if (this.monitors.size > 0) return
    if (this.closing) this.close()
    else this.idleSoon()
  }

  private idleSoon(): void {
    clearTimeout(this.idle)
    this.idle = setTimeout(() => this.close(), this.idleMs)
    this.idle.unref()
  }

  /**
   * The helper ended: runs it had not answered end as failed (whether they
   * ran is unknown); a spawn it had not answered fails; a monitor it started
   * lives on without it, so its end is looked for in /proc (its exit status
   * unknown, as for a process a previous vnode started). The next run
   * starts another helper.
   */
  private gone(child: ChildProcess): void {
    if (this.child === child) this.child = undefined
    for (const [id, run] of this.waiting) {
      if (run.child !== child) continue
      this.waiting.delete(id)
      run.resolve({exitCode: undefined, stdout: '', stderr: 'the helper that ran it exited', timedOut: false})
    }
    for (const [id, entry] of this.monitors) {
      if (entry.child !== child) continue
      this.monitors.delete(id)
      const m = entry.monitor
      if (m.pid === undefined) entry.started(new Error('the helper exited'))
      else watchOrphan(m)
    }
    this.settle()
  }
}

/** The errno's name (ENOENT for 2): undefined for 0 (no errno) or one the platform does not name. */
function errnoCode(errno: number): string | undefined {
  if (!errno) return undefined
  return Object.entries(osConstants.errno).find(([, n]) => n === errno)?.[0]
}

async function runDirectly(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
  const r = await execa(file, args, {input: opts.input ?? '', env: opts.env, extendEnv: false, reject: false, timeout: opts.timeoutMs})
  return {exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr), timedOut: !!r.timedOut}
}

/** The node's helper (one per vnode process: the programs it runs name no node). */
export const helpers = new HelperRunner()
