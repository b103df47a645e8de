import {chmod, lstat, readdir, rm, rmdir, unlink} from 'node:fs/promises'
import {join} from 'node:path'

/**
 * rm -r that also removes read-only directories (volumes and pinned subPaths are made of them). Nothing there is fine.
 *
 * One walk: each directory is opened up, listed with its entries' kinds, emptied and removed; each other entry
 * (files, symlinks, FIFOs) unlinked. A pod's sandbox is removed at every deletion, and looking at each entry again
 * (an lstat per entry, then rm's own walk of each directory) doubled the calls of a burst of deletions.
 * Whatever the walk could not remove (an entry made meanwhile) is left to rm's own.
 */
export async function removeTree(path: string): Promise<void> {
  const st = await lstat(path).catch(() => undefined)
  if (!st) return
  if (st.isDirectory()) await removeDir(path).catch(() => undefined)
  await rm(path, {recursive: true, force: true})
}

async function removeDir(dir: string): Promise<void> {
  await chmod(dir, 0o700).catch(() => undefined)
  for (const e of await readdir(dir, {withFileTypes: true})) {
    const p = join(dir, e.name)
    if (e.isDirectory()) await removeDir(p)
    else await unlink(p).catch(ignoreGone)
  }
  await rmdir(dir).catch(ignoreGone)
}

function ignoreGone(error: NodeJS.ErrnoException): void {
  if (error.code !== 'ENOENT') throw error
}
