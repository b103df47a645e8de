import {removeTree} from '../../../common/remove-tree.js'
import {createHash} from 'node:crypto'
import {chmod, link, lstat, mkdir, readdir, realpath} from 'node:fs/promises'
import {dirname, join, sep} from 'node:path'
import {currentDataDir} from './atomic-writer.js'

/**
 * Where a container's pinned subPath goes: inside the pod's volumes
 * directory (removed with the volumes, Secret content included) under a
 * name no volume can have (volume names are DNS labels).
 */
export function subPathPinDir(volumesDir: string, container: string, mountPath: string): string {
  return join(volumesDir, '..subpaths', container, createHash('sha256').update(mountPath).digest('hex').slice(0, 16))
}

/**
 * A subPath of an atomic-writer volume (ConfigMap, Secret, downwardAPI,
 * projected) is not updated when the volume is: the kubelet bind-mounts the
 * file or directory as it resolves when the container starts, and the bind
 * keeps it after the writer removes that version. Here the resolved version
 * is hard-linked (files share their inodes, nothing is copied) into pinDir,
 * which is what the container's mount points at; the next start pins again.
 * Any other volume's subPath is returned as it is.
 */
export async function pinSubPath(volumePath: string, target: string, pinDir: string): Promise<string> {
  const data = await currentDataDir(volumePath)
  if (!data) return target
  const real = await realpath(target).catch(() => undefined)
  const dataReal = await realpath(data).catch(() => data)
  if (!real || (real !== dataReal && !real.startsWith(dataReal + sep))) return target
  await removeTree(pinDir)
  await mkdir(dirname(pinDir), {recursive: true, mode: 0o700})
  await linkTree(real, pinDir)
  return pinDir
}

async function linkTree(from: string, to: string): Promise<void> {
  const st = await lstat(from)
  if (!st.isDirectory()) return link(from, to)
  await mkdir(to, {mode: 0o700})
  for (const e of await readdir(from)) await linkTree(join(from, e), join(to, e))
  await chmod(to, st.mode & 0o777)
}
