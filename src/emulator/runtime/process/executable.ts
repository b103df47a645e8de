import {accessSync, constants as fsc, statSync} from 'node:fs'
import {delimiter, isAbsolute, join, resolve} from 'node:path'

/** A command that could not be started (runc's "exec failed" cases). */
export class ExecStartError extends Error {}

/** The executable as execvp would find it: a path with a '/' is taken as is (relative to cwd), otherwise the env's PATH. */
export function resolveExecutable(file: string, env: Record<string, string>, cwd: string, toHost: (path: string) => string | undefined = (p) => p): string {
  const candidates = file.includes('/')
    ? [isAbsolute(file) ? file : resolve(cwd, file)]
    : (env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(isAbsolute(d) ? d : resolve(cwd, d), file))
  let denied = false
  for (const path of candidates) {
    const host = toHost(path)
    // Where the host has no counterpart (a sandbox's own /dev or /proc), only the exec can tell.
    if (host === undefined) return path
    try {
      if (!statSync(host).isFile()) continue
      accessSync(host, fsc.X_OK)
      return path
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true
    }
  }
  if (denied) throw new ExecStartError(`exec: "${file}": permission denied`)
  if (file.includes('/')) throw new ExecStartError(`exec: "${file}": stat ${file}: no such file or directory`)
  throw new ExecStartError(`exec: "${file}": executable file not found in $PATH`)
}
