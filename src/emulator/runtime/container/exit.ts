import {closeSync, openSync, readSync} from 'node:fs'
import {constants} from 'node:os'
import {ContainerStatusUnknownExitCode, ContainerStatusUnknownReason} from '../../provider/pod-defaults.js'
import {OOMKilledReason} from '../cgroups/pod-cgroup.js'
import type {ExitInfo} from '../process/process-spec.js'
import type {Termination} from './fields.js'
import type {ContainerState} from './state.js'
import {readLogTail} from '../logs/reader.js'
import {SandboxEndedEarly, StartErrorExitCode, StartErrorReason} from '../process/command-errors.js'

/** The kubelet reads at most this much of a termination message file. */
export const MaxTerminationMessageBytes = 4096
export const AdoptedExitMessage = 'The container was adopted after a restart of vnode; its exit status could not be read'

/**
 * A finished instance as the kubelet reports it: OOMKilled when the kernel
 * says so, else Error or Completed by the exit code; the termination
 * message from its file (or the log's tail, FallbackToLogsOnError). An
 * adopted process is not vnode's child, so how it ended cannot be read:
 * ContainerStatusUnknown, exit 137.
 */
export function terminationOf(c: ContainerState, startedAt: Date, exit: ExitInfo, oomKilled: boolean): Termination {
  if (exit.setupFailed) return startFailure(c, startedAt, exit)
  const failed = exit.exitCode !== 0
  const t: Termination = {
    exitCode: exit.exitCode,
    ...(exit.signal ? {signal: constants.signals[exit.signal]} : {}),
    reason: oomKilled ? OOMKilledReason : failed ? 'Error' : 'Completed',
    startedAt,
    finishedAt: exit.finishedAt,
    containerID: c.containerID,
  }
  const message = terminationMessage(c, failed)
  if (message) t.message = message
  if (exit.unknown && !oomKilled) {
    Object.assign(t, {exitCode: ContainerStatusUnknownExitCode, reason: ContainerStatusUnknownReason, message: message || AdoptedExitMessage})
  } else if (exit.unknown) t.exitCode = ContainerStatusUnknownExitCode
  return t
}

/** What bwrap prints when it fails: `bwrap: <what>: <why>`, on the container's stderr. */
const BwrapWords = /^bwrap: .*/gm

/**
 * A sandbox that failed before its program ran (bwrap's setup or exec, after it named PID 1): the runtime's
 * StartError, exit code 128, as runc's failed start is on a kubelet, in bwrap's words (from the container's log).
 */
function startFailure(c: ContainerState, startedAt: Date, exit: ExitInfo): Termination {
  const words = c.logPath ? (readLogTail(c.logPath).match(BwrapWords) ?? []) : []
  const message = `failed to start container process: ${words.length > 0 ? words.join('; ') : SandboxEndedEarly}`
  return {exitCode: StartErrorExitCode, reason: StartErrorReason, message, startedAt, finishedAt: exit.finishedAt, containerID: c.containerID}
}

function terminationMessage(c: ContainerState, failed: boolean): string {
  let msg = ''
  if (c.terminationMessageFile) {
    try {
      const fd = openSync(c.terminationMessageFile, 'r')
      try {
        const buf = Buffer.alloc(MaxTerminationMessageBytes)
        msg = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8')
      } finally {
        closeSync(fd)
      }
    } catch {
      /* no message */
    }
  }
  if (!msg && failed && c.spec.terminationMessagePolicy === 'FallbackToLogsOnError' && c.logPath) msg = readLogTail(c.logPath)
  return msg
}
