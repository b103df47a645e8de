import type {V1Container} from '@kubernetes/client-node'
import {constants} from 'node:fs'
import {access, mkdir, stat, writeFile} from 'node:fs/promises'
import {delimiter, isAbsolute, join} from 'node:path'
import {expand, mappingFor} from '../env/expansion.js'
import {ImageDirVar, missingProgramMessage, type ResolvedProgram} from './image-map.js'

/** A container's image directory: where a mapped server program keeps its config, pid and temp files. */
export function imageDir(sandbox: string, container: string): string {
  return join(sandbox, 'images', container)
}

export type PreparedProgram = {ok: true; argv: string[]; imageDir?: string} | {ok: false; message: string}

/**
 * The argv a container runs, after `$(VAR)` expansion. A program from an
 * image map entry also gets its image directory (`$(VNODE_IMAGE_DIR)`, with
 * the entry's files written there) and must be installed: otherwise the
 * start fails (CreateContainerError) with a message that says how to map it.
 */
export async function prepareProgram(program: ResolvedProgram, container: V1Container, sandbox: string, env: Record<string, string>): Promise<PreparedProgram> {
  const mapping = mappingFor(env)
  if (!program.mapped) return {ok: true, argv: program.argv.map((a) => expand(a, mapping))}
  const dir = imageDir(sandbox, container.name)
  const own = mappingFor({[ImageDirVar]: dir})
  const file = expand(program.argv[0] ?? '', own)
  if (!(await installed(file, env.PATH ?? ''))) return {ok: false, message: missingProgramMessage(container, program, env.PATH ?? '')}
  await mkdir(dir, {recursive: true, mode: 0o700})
  for (const [name, content] of Object.entries(program.files ?? {})) await writeFile(join(dir, name), expand(content, own), {mode: 0o600})
  return {ok: true, argv: program.argv.map((a) => expand(expand(a, own), mapping)), imageDir: dir}
}

/** Whether the program can be executed: a path as it is, a bare name on PATH (as execvp looks it up). */
export async function installed(file: string, path: string): Promise<boolean> {
  if (!file) return false
  if (file.includes('/')) return !isAbsolute(file) || (await executable(file))
  for (const dir of path.split(delimiter)) if (dir && (await executable(join(dir, file)))) return true
  return false
}

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK)
    return (await stat(path)).isFile()
  } catch {
    return false
  }
}
