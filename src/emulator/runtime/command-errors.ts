/**
 * A relative command (`./run.sh`) is not looked up in $PATH but in the
 * container's working directory (execvp's rule): the error says which
 * directory that was, and what sets it. Both runtimes (bare process, sandbox) use it.
 */
export function relativeCommandNotFound(file: string, cwd: string): string {
  return `exec: "${file}": no such file or directory: a relative command is looked up in the container's working directory "${cwd}" (set workingDir to choose it)`
}
