import {readlinkSync} from 'node:fs'
import {basename} from 'node:path'
import {identityArgv} from '../sandbox/security-context.js'
import type {ContainerSandboxSpec} from '../sandbox/spec.js'
import type {RawExit, SandboxedProcess} from './process-spec.js'
import {readStat} from './proc.js'
import type {SandboxMonitor} from './helper-runner.js'

/**
 * How long a sandbox may take to set up before vnode enters it anyway: far
 * longer than a setup takes, since entering early is what fails (nsenter
 * finds a root still being built: `failed to execute ...: No such file or
 * directory`), and a burst of starts on a loaded host serialises every
 * bwrap's dozens of mounts on the kernel's namespace lock for seconds.
 */
export const DefaultSandboxSetupWaitMs = 60_000
/** How often it looks: soon at first (a setup takes milliseconds), less often once it takes longer. */
export const DefaultSandboxSetupPollMs = 5
export const MaxSandboxSetupPollMs = 100
/**
 * How long before each boundary of the look period (the relist's) one more
 * look is taken: a start is reported at the first relist after its program
 * was seen running, so a program that ran just before a relist but was seen
 * just after it would be reported a whole period late.
 */
export const DefaultLookBeforeBoundaryMs = 30

/** bwrap's exit status when it fails itself (its die()). */
export const BwrapFailureExitCode = 1
/** How long after bwrap's exit its status fd may take to close; past it the program is taken to have run. */
export const DefaultStatusCloseWaitMs = 1_000

/**
 * The exit of a sandboxed instance: its PID 1's status, passed on by bwrap,
 * unless bwrap failed itself after naming PID 1 (exit status 1 and no exit
 * code of its command reported: its setup or the exec failed), which is a
 * failed start (setupFailed).
 */
export async function sandboxExit(started: {monitor: SandboxMonitor; programRan: Promise<boolean>}, waitMs = DefaultStatusCloseWaitMs): Promise<RawExit> {
  const raw = await monitorExit(started.monitor)
  if (raw.code !== BwrapFailureExitCode) return raw
  let timer: NodeJS.Timeout | undefined
  const ran = await Promise.race([started.programRan, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), waitMs)))])
  clearTimeout(timer)
  return ran ? raw : {...raw, setupFailed: true}
}

/** The exit of a sandbox's bwrap monitor, which passes its PID 1's status on (also when it has exited already). */
export function monitorExit(monitor: SandboxMonitor): Promise<RawExit> {
  return new Promise<RawExit>((resolve) => {
    if (monitor.exitCode !== null || monitor.signalCode !== null) resolve({code: monitor.exitCode, signal: monitor.signalCode})
    else monitor.once('exit', (code, signal) => resolve({code, signal}))
  })
}

/** What an instance keeps of its sandbox's spec, for exec to enter it: its network namespace, a PID namespace shared with the pod, the host's IPC namespace. */
export function sandboxedProcess(sandbox: ContainerSandboxSpec): SandboxedProcess {
  const identity = sandbox.security?.applyIdentity ? identityArgv(sandbox.security.context) : undefined
  return {
    netns: !!sandbox.netns,
    ...(sandbox.pidNamespaceOf ? {sharedPid: true} : {}),
    ...(sandbox.security?.hostIPC ? {hostIPC: true} : {}),
    ...(sandbox.rootLayer?.mode === 'user-namespace' ? {layerUserNamespace: true} : {}),
    ...(identity ? {identity} : {}),
  }
}

/**
 * Until the process no longer runs bwrap itself (it exec'd the container's
 * program), or is gone. A /proc entry that cannot be read while the process
 * lives (bwrap in a user namespace of its own may refuse it for a moment) is
 * not an end: only a process that is gone or a zombie is.
 */
export async function waitForProgram(pid: number, waitMs = DefaultSandboxSetupWaitMs, lookPeriodMs?: number): Promise<void> {
  const deadline = Date.now() + waitMs
  let pollMs = DefaultSandboxSetupPollMs
  while (Date.now() < deadline) {
    try {
      if (basename(readlinkSync(`/proc/${pid}/exe`)) !== 'bwrap') return
    } catch {
      const s = readStat(pid)
      if (!s || s.state === 'Z' || s.state === 'X') return
    }
    await new Promise((r) => setTimeout(r, nextLookDelay(Date.now(), pollMs, lookPeriodMs)))
    pollMs = Math.min(MaxSandboxSetupPollMs, pollMs * 2)
  }
}

/**
 * The wait before the next look: the back-off's, or less, to look once just
 * before the next boundary of `lookPeriodMs` (epoch multiples, as relists
 * tick) when that comes sooner. Within that last stretch before a boundary
 * the back-off's wait stands: the look there is done.
 */
export function nextLookDelay(now: number, pollMs: number, lookPeriodMs?: number, beforeMs = DefaultLookBeforeBoundaryMs): number {
  if (!lookPeriodMs || lookPeriodMs <= beforeMs) return pollMs
  const look = Math.floor(now / lookPeriodMs) * lookPeriodMs + lookPeriodMs - beforeMs
  return now < look ? Math.min(pollMs, look - now) : pollMs
}
