import {isAbsolute} from 'node:path'

/** A container process that could not be started: the runtime's StartError. */
export class StartError extends Error {}

/** How a failed start ends its instance (the kubelet's status of a container whose runtime start failed). */
export const StartErrorReason = 'StartError'
export const StartErrorExitCode = 128
/** A sandbox that ended before its program ran, without saying why. */
export const SandboxEndedEarly = 'the sandbox ended before its program started'

/**
 * A relative command (`./run.sh`) is not looked up in $PATH but in the
 * container's working directory (execvp's rule): the error says which
 * directory that was, and what sets it. Both runtimes (bare process, sandbox) use it.
 */
export function relativeCommandNotFound(file: string, cwd: string): string {
  return `exec: "${file}": no such file or directory: a relative command is looked up in the container's working directory "${cwd}" (set workingDir to choose it)`
}

/** runc's words for an exec that failed: not found in $PATH, permission denied, or a relative command not in the working directory. */
export function startErrorMessage(file: string, e: NodeJS.ErrnoException | undefined, cwd: string): string {
  const prefix = 'failed to start container process: exec'
  // A relative path is not looked up in $PATH but in the working directory: say which one, and what sets it.
  if (e?.code === 'ENOENT' && file.includes('/') && !isAbsolute(file)) {
    return `failed to start container process: ${relativeCommandNotFound(file, cwd)}`
  }
  if (e?.code === 'ENOENT') return `${prefix}: "${file}": executable file not found in $PATH`
  if (e?.code === 'EACCES') return `${prefix}: "${file}": permission denied`
  return `${prefix}: "${file}": ${e?.message ?? 'unknown error'}`
}

/** A refused write of a value to a file (a cgroup's, by vnode or by the helper): the file, the value and the errno's code. */
export function refusedWriteMessage(file: string, value: string | number, code: string): string {
  return `cannot write ${value} to ${file}: ${code}`
}
