import {chmod, lstat, readdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

/** rm -r that also removes read-only directories (volumes and pinned subPaths are made of them). Nothing there is fine. */
export async function removeTree(path: string): Promise<void> {
  const st = await lstat(path).catch(() => undefined)
  if (!st) return
  if (st.isDirectory()) {
    await chmod(path, 0o700).catch(() => undefined)
    for (const e of await readdir(path)) await removeTree(join(path, e))
  }
  await rm(path, {recursive: true, force: true})
}
