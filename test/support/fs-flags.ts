import {spawnSync} from 'node:child_process'
import {statfsSync} from 'node:fs'

/** ext2, ext3 and ext4 share one superblock magic (statfs's f_type). */
export const Ext4Magic = 0xef53

/** Whether a directory is on ext2/3/4. */
export function onExt4(dir: string): boolean {
  return statfsSync(dir).type === Ext4Magic
}

/** Whether lsattr shows the top-of-hierarchy flag (T) on a directory (a filesystem without flags has none). */
export function topFlag(dir: string): boolean {
  const r = spawnSync('lsattr', ['-d', dir], {encoding: 'utf8'})
  if (r.status !== 0 && onExt4(dir)) throw new Error(`lsattr -d ${dir}: ${r.stderr}`)
  return r.status === 0 && r.stdout.split(/\s+/)[0]!.includes('T')
}
