import {execFile} from 'node:child_process'
import {BwrapProgram} from './bwrap.js'
import type {SandboxMode, SandboxRequest} from './spec.js'

/**
 * How long the trial sandbox may take before the host counts as not allowing
 * one. It takes milliseconds; the margin is for a machine under heavy load,
 * where a short limit would quietly take the sandbox away.
 */
export const DefaultDetectTimeoutMs = 30_000

export interface SandboxSupport {
  mode: SandboxMode
  /** Why the node runs without namespaces (asked for `none`, or what the host refused). */
  reason?: string
}

/**
 * What the host allows: a real trial run of the same kind of sandbox a
 * container gets (mount, PID and UTS namespaces, PID 1). As root that needs
 * nothing more; unprivileged, bwrap makes a user namespace, which some
 * hosts forbid. `auto` falls back to `none` with the reason; `namespaces`
 * insists and fails.
 */
export async function detectSandbox(request: SandboxRequest, timeoutMs = DefaultDetectTimeoutMs): Promise<SandboxSupport> {
  if (request === 'none') return {mode: 'none', reason: 'asked for with --sandbox none'}
  const refused = await trialRun(timeoutMs)
  if (!refused) return {mode: 'namespaces'}
  if (request === 'namespaces') throw new Error(`--sandbox namespaces: this host does not allow a pod sandbox: ${refused}`)
  return {mode: 'none', reason: refused}
}

/** undefined when the trial sandbox ran, else what went wrong. */
function trialRun(timeoutMs: number): Promise<string | undefined> {
  const args = ['--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '--unshare-pid', '--as-pid-1', '--unshare-uts', '--hostname', 'vnode-probe', '--', 'true']
  return new Promise((resolve) => {
    execFile(BwrapProgram, args, {timeout: timeoutMs}, (error, _stdout, stderr) => {
      if (!error) return resolve(undefined)
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return resolve(`${BwrapProgram} (bubblewrap) is not installed`)
      if (error.killed) return resolve(`${BwrapProgram} did not finish a trial sandbox within ${timeoutMs / 1000} s`)
      resolve(`${BwrapProgram} failed: ${String(stderr).trim() || error.message}`)
    })
  })
}
