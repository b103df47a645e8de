import {PlaceScript} from '../sandbox/spawn.js'
import {ExecStartError, resolveExecutable} from './executable.js'
import {hostProgram} from './host-programs.js'
import type {SpawnSpec} from './process-spec.js'

/**
 * The argv of a bare host process: with cgroupProcs, the placing shell
 * (PlaceScript: the files and the command are "$@", never parsed) writes its
 * pid to each file and execs the program, so nothing of the program runs
 * outside its cgroups. A program that does not resolve is spawned as given,
 * for the spawn's own error (the StartError message of every other start).
 */
export function placedArgv(spec: SpawnSpec, file: string, args: string[]): string[] {
  if (!spec.cgroupProcs?.length) return [file, ...args]
  let path: string
  try {
    path = resolveExecutable(file, spec.env, spec.cwd)
  } catch (error) {
    if (error instanceof ExecStartError) return [file, ...args]
    throw error
  }
  return [hostProgram('sh'), '-c', PlaceScript, 'vnode-place', ...spec.cgroupProcs, '--', path, ...args]
}
