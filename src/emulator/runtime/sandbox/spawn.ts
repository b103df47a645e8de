import {spawn, type ChildProcess} from 'node:child_process'
import {closeSync, openSync, statSync} from 'node:fs'
import {isAbsolute} from 'node:path'
import type {Readable, Writable} from 'node:stream'
import {ExecStartError, resolveExecutable} from '../process/executable.js'
import {BwrapProgram, bwrapArgs, MountPointError} from './bwrap.js'
import {identityArgv} from './security-context.js'
import {hostPathOf, type ContainerSandboxSpec} from './spec.js'
import {NsenterProgram, sandboxEntry, type SandboxEntry} from './entry.js'
import {helpers, type HelperMonitor, type SandboxMonitor} from '../process/helper-runner.js'
import {relativeCommandNotFound, SandboxEndedEarly} from '../process/command-errors.js'
import {hostProgram} from '../process/host-programs.js'
import {ControllingTerminalPrefix} from '../container/tty.js'

/** How long bwrap may take to report its sandboxed PID 1. */
export const DefaultSandboxStartTimeoutMs = 10_000

export class SandboxStartError extends Error {}

export interface SandboxedSpawn {
  /** The argv to run inside, the container's env and its cwd in the container's view. */
  argv: string[]
  env: Record<string, string>
  cwd: string
  sandbox: ContainerSandboxSpec
  stdin: 'pipe' | 'ignore' | number
  /** stdin, stdout and stderr are a terminal's slave side: it becomes PID 1's controlling terminal (container-tty.ts). */
  tty?: boolean
  stdout: number | 'ignore'
  stderr: number | 'ignore'
  /** The paths of the instance's output pipes (stdout and stderr above): given, the helper may start it (no stdin, no terminal). */
  pipes?: {stdout: string; stderr: string}
  /** The cgroup.procs files PID 1 joins before its program runs: the helper writes them, or `place` does. */
  cgroupProcs?: string[]
  /** Places PID 1 in its cgroups when the helper did not (vnode's own spawn); a throw fails the start. */
  place?: (pid: number) => Promise<void>
}

export interface SandboxedChild {
  /** bwrap itself, vnode's child or its helper's: its exit status is PID 1's (128+n when a signal ended it). */
  monitor: SandboxMonitor
  /** The host pid of the container's PID 1. */
  pid: number
  stdin?: Writable
  /**
   * Resolves, once bwrap's status fd is closed, to whether the container's program ran: bwrap reports the exit code of
   * its command only when the command was exec'd, so an end without it is bwrap's own (its setup, or the exec, failed
   * after it named PID 1, with exit status 1 and its words on the container's stderr).
   */
  programRan: Promise<boolean>
}

/**
 * Starts a container in its sandbox. Whatever a runtime would refuse is
 * checked first, in the container's view (the working directory, the
 * program), so it fails as a StartError with runc's words instead of
 * bwrap's exit status 1.
 */
export async function spawnSandboxed(s: SandboxedSpawn): Promise<SandboxedChild> {
  const [file] = s.argv
  if (!file) throw new SandboxStartError('no command to run')
  checkCwd(s.sandbox, s.cwd)
  checkProgram(s.sandbox, file, s.env, s.cwd)
  let args: string[]
  try {
    args = [
      ...bwrapArgs(s.sandbox, {cwd: s.cwd, block: true}),
      '--',
      ...withoutBwrapPwd(s.env),
      ...(s.sandbox.security?.applyIdentity ? identityArgv(s.sandbox.security.context) : []),
      ...(s.tty ? [hostProgram(ControllingTerminalPrefix[0]), ...ControllingTerminalPrefix.slice(1)] : []),
      ...s.argv,
    ]
  } catch (error) {
    if (error instanceof MountPointError) throw new SandboxStartError(`error mounting volume: ${error.message}`)
    throw error
  }
  // The namespaces, and the writable layer mounted in one of the instance's own, just before bwrap (entry.ts).
  const entry = sandboxEntry(s.sandbox, s.env, [hostProgram(BwrapProgram), ...args])
  const {monitor, status, go, stdin, placed} = s.pipes && s.stdin === 'ignore' && !s.tty && helpers.canSpawn ? await fromHelper(s, s.pipes, entry) : fromVnode(s, entry)
  const programRan = commandExitReported(status)
  const pid = await childPid(monitor, status)
  try {
    // The helper's answer comes before the status it passes on: settled by now.
    if (placed) await placed
    else await s.place?.(pid)
  } catch (error) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone (what could not be placed): the start failed either way.
    }
    throw new SandboxStartError((error as Error).message)
  }
  if (!placed) go()
  return {monitor, pid, stdin, programRan}
}

/** A started monitor: its status fd's reader, and how its block fd gets the word to go. */
interface StartedMonitor {
  monitor: SandboxMonitor
  status: Readable
  go: () => void
  stdin?: Writable
  /** The helper places PID 1 in its cgroups and lets it go itself: settled once it did, or could not. */
  placed?: Promise<void>
}

/** bwrap (behind its entry) as vnode's child: the stdio given, its status and block fds pipes of vnode's. */
function fromVnode(s: SandboxedSpawn, entry: SandboxEntry): StartedMonitor {
  const [program, ...programArgs] = entry.argv
  const pidns = s.sandbox.pidNamespaceOf ? openSync(`/proc/${s.sandbox.pidNamespaceOf}/ns/pid`, 'r') : undefined
  let monitor: ChildProcess
  try {
    monitor = spawn(hostProgram(program!), programArgs, {
      env: entry.env,
      cwd: '/',
      detached: true,
      stdio: [s.stdin, s.stdout, s.stderr, 'pipe', 'pipe', ...(pidns !== undefined ? [pidns] : [])],
    })
  } finally {
    if (pidns !== undefined) closeSync(pidns)
  }
  const block = monitor.stdio[4] as Writable
  block.on('error', () => undefined)
  return {monitor, status: monitor.stdio[3] as Readable, go: () => block.end('go'), stdin: monitor.stdin ?? undefined}
}

/**
 * bwrap (behind its entry) as the helper's child (process/helper-runner.ts):
 * vnode does not fork itself for it. Its output pipes are opened by path;
 * what its status fd says and its exit come back from the helper.
 */
async function fromHelper(s: SandboxedSpawn, pipes: {stdout: string; stderr: string}, entry: SandboxEntry): Promise<StartedMonitor> {
  let monitor: HelperMonitor
  try {
    monitor = await helpers.spawn({
      argv: entry.argv,
      script: entry.script,
      env: entry.env,
      stdout: pipes.stdout,
      stderr: pipes.stderr,
      pidns: s.sandbox.pidNamespaceOf ? `/proc/${s.sandbox.pidNamespaceOf}/ns/pid` : undefined,
      cgroupProcs: s.cgroupProcs,
    })
  } catch (error) {
    throw new SandboxStartError((error as Error).message)
  }
  return {monitor, status: monitor.status, go: () => monitor.go(), placed: s.cgroupProcs?.length ? monitor.placed : undefined}
}

/** Whether bwrap's status fd brings the `exit-code` document (bwrap >= 0.3.2) before it closes. */
function commandExitReported(status: Readable): Promise<boolean> {
  return new Promise((resolve) => {
    let text = ''
    status.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
    status.once('close', () => resolve(/"exit-code"/.test(text)))
    status.once('error', () => resolve(true))
  })
}

/** coreutils' env, which execs the program in its place (it stays PID 1). */
export const EnvProgram = '/usr/bin/env'

/**
 * bwrap exports PWD for its --chdir; a runtime sets no such variable, so
 * it is taken out again unless the container's env has its own.
 */
function withoutBwrapPwd(env: Record<string, string>): string[] {
  return Object.hasOwn(env, 'PWD') ? [] : [EnvProgram, '-u', 'PWD', '--']
}

/** The first JSON document of bwrap's status fd names the sandboxed PID 1. */
function childPid(monitor: SandboxMonitor, status: Readable): Promise<number> {
  return new Promise((resolvePid, reject) => {
    let text = ''
    const timer = setTimeout(() => fail(new SandboxStartError('the sandbox did not start in time')), DefaultSandboxStartTimeoutMs)
    const fail = (e: Error) => {
      clearTimeout(timer)
      status.off('data', onData)
      monitor.kill('SIGKILL')
      reject(e)
    }
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8')
      const m = /"child-pid":\s*(\d+)/.exec(text)
      if (!m) return
      clearTimeout(timer)
      status.off('data', onData)
      resolvePid(Number(m[1]))
    }
    status.on('data', onData)
    monitor.once('error', (e) => fail(new SandboxStartError(e.message)))
    monitor.once('exit', () => fail(new SandboxStartError(SandboxEndedEarly)))
  })
}

function checkCwd(sandbox: ContainerSandboxSpec, cwd: string): void {
  const host = hostPathOf(sandbox, cwd)
  if (host === undefined) return // in /dev or /proc: made fresh in the sandbox
  try {
    if (statSync(host).isDirectory()) return
  } catch {
    /* missing */
  }
  throw new SandboxStartError(`chdir to cwd ("${cwd}") set in config.json failed: no such file or directory`)
}

/** execvp's lookup, done in the container's view: a path with '/' as is (relative to cwd), else PATH. */
function checkProgram(sandbox: ContainerSandboxSpec, file: string, env: Record<string, string>, cwd: string): void {
  try {
    resolveExecutable(file, env, cwd, (p) => hostPathOf(sandbox, p))
  } catch (error) {
    if (!(error instanceof ExecStartError)) throw error
    if (file.includes('/') && !isAbsolute(file) && !error.message.endsWith('permission denied')) throw new SandboxStartError(relativeCommandNotFound(file, cwd))
    throw new SandboxStartError(error.message)
  }
}

/**
 * The step that puts an exec'd command in its container's cgroups before
 * it runs: the shell writes its own pid to each cgroup.procs file given,
 * up to `--`, then execs the rest (nsenter, whose children inherit the
 * cgroups). A fixed script: the files and the command are "$@", never
 * parsed by the shell.
 */
export const PlaceScript = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 126; shift; done; shift; exec "$@"'

/** Which of a container's namespaces exec joins beyond its mount, UTS and PID ones (sandboxed-start.ts keeps them per instance). */
export interface EnterNamespaces {
  /** It runs in a network namespace of its own (the pod network). */
  network: boolean
  /**
   * It has the host's IPC namespace (hostIPC): nothing to join, and without
   * privileges joining it would fail (the host's namespace belongs to the
   * initial user namespace, where vnode's user has no CAP_SYS_ADMIN).
   */
  hostIPC?: boolean
  /** Unprivileged: the host pid whose user namespace (the writable layer's) owns the container's namespaces. */
  layerUserNamespaceOf?: number
}

/**
 * The argv prefix that runs a program in a container's namespaces (exec,
 * probes, hooks): in its cgroups (the cgroup.procs files of its instance),
 * then its mount, UTS, IPC (unless hostIPC), PID (and network) namespaces,
 * its root, and its working directory in that root (`--wdns`: `--wd` would
 * open the directory in the host's view, outside the container's root).
 * IPC as runc's exec joins it: System V objects and POSIX queues a command
 * makes are the container's, and it sees the container's, not the host's.
 */
export function enterArgv(pid: number, cwd: string, ns: EnterNamespaces, cgroupProcs: string[] = []): string[] {
  const place = cgroupProcs.length > 0 ? [hostProgram('sh'), '-c', PlaceScript, 'vnode-place', ...cgroupProcs, '--'] : []
  // Unprivileged: the container's namespaces belong to bwrap's user namespace, a child of the layer's (held by
  // bwrap's own process), where vnode's user has every capability; bwrap's nested second one is not joinable.
  const user = ns.layerUserNamespaceOf ? [`--user=/proc/${ns.layerUserNamespaceOf}/ns/user`, '--preserve-credentials'] : []
  return [
    ...place,
    hostProgram(NsenterProgram),
    `--target=${pid}`,
    ...user,
    '--mount',
    '--uts',
    ...(ns.hostIPC ? [] : ['--ipc']),
    '--pid',
    ...(ns.network ? ['--net'] : []),
    '--root',
    `--wdns=${cwd}`,
    '--',
  ]
}
