import type {V1Pod, V1Volume} from '@kubernetes/client-node'
import {chmod, lchown, lstat, readdir} from 'node:fs/promises'
import {join} from 'node:path'

/**
 * fsGroup on a volume, as the kubelet's SetVolumeOwnership: every file
 * and directory gets the group fsGroup, read and write for the group (read
 * only on a read-only volume: configMap, secret, downwardAPI, projected),
 * directories also search and setgid, so new files keep the group.
 * Symlinks are re-grouped, never chmod'ed. fsGroupChangePolicy
 * OnRootMismatch skips a volume whose root already has the group and the
 * permissions. hostPath and PVC volumes keep theirs (the kubelet applies
 * fsGroup only to volumes that support ownership management).
 */
const RwMask = 0o660
const RoMask = 0o440
const ExecMask = 0o110
const SetgidBit = 0o2000

/** The volumes fsGroup applies to (the kubelet's volume plugins with SupportsOwnershipManagement / fsGroup on their SetUp). */
export function takesFsGroup(v: V1Volume): boolean {
  return !!(v.emptyDir || v.configMap || v.secret || v.downwardAPI || v.projected)
}

/** The kubelet mounts the API-data volumes read-only. */
function readOnlyVolume(v: V1Volume): boolean {
  return !v.emptyDir
}

/**
 * A group vnode's user may give its files: any as root, otherwise one of its
 * own. Another is a wall this node cannot build: the container's config
 * refuses it (CreateContainerConfigError, sandbox/walls.ts), so the volume
 * is left as it is rather than failing its mount with EPERM.
 */
function mayGiveGroup(gid: number): boolean {
  return process.getuid?.() === 0 || process.getgid?.() === gid || (process.getgroups?.() ?? []).includes(gid)
}

export async function applyFsGroup(pod: V1Pod, v: V1Volume, dir: string): Promise<void> {
  const fsGroup = pod.spec?.securityContext?.fsGroup
  if (fsGroup === undefined || !takesFsGroup(v) || !mayGiveGroup(fsGroup)) return
  const mask = readOnlyVolume(v) ? RoMask : RwMask
  if (pod.spec?.securityContext?.fsGroupChangePolicy === 'OnRootMismatch') {
    const root = await lstat(dir)
    if (root.gid === fsGroup && (root.mode & mask) === mask && (root.mode & SetgidBit) !== 0) return
  }
  await walk(dir, fsGroup, mask)
}

async function walk(path: string, gid: number, mask: number): Promise<void> {
  const st = await lstat(path)
  await lchown(path, st.uid, gid)
  if (st.isSymbolicLink()) return
  const dir = st.isDirectory()
  await chmod(path, (st.mode & 0o7777) | mask | (dir ? ExecMask | SetgidBit : 0))
  if (!dir) return
  for (const name of await readdir(path)) await walk(join(path, name), gid, mask)
}
