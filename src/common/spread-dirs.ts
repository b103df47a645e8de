import {execa} from 'execa'

/** How long chattr may take (a state dir on a network filesystem that does not answer). */
export const DefaultSpreadTimeoutMs = 5_000

/**
 * Marks directories whose subdirectories are unrelated trees (a pod's
 * directory, a pod's logs) as the top of their hierarchies for ext2/3/4
 * (`chattr +T`, FS_TOPDIR_FL): the Orlov allocator then places each new
 * subdirectory in a block group of its own choosing, as it does those of
 * the filesystem's root, where it would otherwise put it near its parent.
 *
 * Why: without a journal, ext4 passes over, at every inode allocation, each
 * free inode of the group that was deleted in the last 5 s (305 s while its
 * inode table block is dirty), looking each up in the buffer cache. A pod
 * creates and deletes some twenty inodes (its files, its layer, its logs),
 * so with every pod in its parent's group a burst's allocations each walked
 * the previous burst's deleted inodes: measured on a 100-pod burst, about a
 * sixth of the machine's CPU. With a journal ext4 does not look, and the
 * flag only spreads the trees (what it is meant for: /home's). Other
 * filesystems refuse it, and nothing changes there: a failure is not
 * reported (it is a placement hint, not a wall). The flag is not inherited.
 *
 * Resolves to whether chattr set it on every dir (false on other filesystems, or without chattr).
 */
export async function spreadSubdirectories(dirs: string[]): Promise<boolean> {
  if (dirs.length === 0) return true
  try {
    const r = await execa('chattr', ['+T', '--', ...dirs], {reject: false, stdin: 'ignore', timeout: DefaultSpreadTimeoutMs})
    return r.exitCode === 0
  } catch {
    return false
  }
}
