import {closeSync, openSync, readSync} from 'node:fs'
import {constants} from 'node:os'
import {ContainerStatusUnknownExitCode, ContainerStatusUnknownReason} from '../../provider/pod-defaults.js'
import {OOMKilledReason} from '../cgroups/pod-cgroup.js'
import type {ExitInfo} from '../process/process-spec.js'
import type {Termination} from './fields.js'
import type {ContainerState} from './state.js'
import {readLogTail} from '../logs/reader.js'

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
