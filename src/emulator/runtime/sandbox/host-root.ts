import {lstatSync, readdirSync, readlinkSync, statSync, type Dirent} from 'node:fs'
import {join} from 'node:path'

/**
 * The entries of a host directory as a container's view needs them: every
 * top-level entry of `/` is bound back (bwrap.ts) and its directories are
 * overlaid (root-layer.ts) at every container start. `/` is listed again
 * only when it changed: adding, removing or replacing an entry (a symlink
 * retargeted is one replaced) changes its mtime, so a start costs one stat
 * of `/` instead of a listing, an lstat per entry and a readlink per
 * symlink, twice.
 */
export interface DirEntry {
  name: string
  path: string
  kind: 'dir' | 'file' | 'symlink' | 'other'
  /** A symlink's target, as it is written. */
  target?: string
}

/**
 * How long ago `/` must have changed before its listing is kept: two
 * changes in one tick of the file timestamp clock leave the same mtime, so
 * a listing taken in that tick could miss the second one for good.
 */
export const SettledMs = 2_000

let rootCache: {key: string; entries: DirEntry[]} | undefined

/** The entries of `/`, from the cache while `/` is unchanged. */
export function hostRootEntries(now = Date.now()): DirEntry[] {
  let st
  try {
    st = statSync('/', {bigint: true})
  } catch {
    return []
  }
  const key = `${st.dev}:${st.ino}:${st.mtimeNs}:${st.ctimeNs}`
  if (rootCache?.key === key) return rootCache.entries
  const entries = dirEntries('/')
  const changedMs = Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n)
  if (now - changedMs > SettledMs) rootCache = {key, entries}
  return entries
}

/** Forgets the listing of `/` (tests). */
export function forgetHostRoot(): void {
  rootCache = undefined
}

/** A directory's entries, read now; none when it cannot be read. */
export function dirEntries(dir: string): DirEntry[] {
  let entries: Dirent[]
  try {
    entries = readdirSync(dir, {withFileTypes: true})
  } catch {
    return []
  }
  const out: DirEntry[] = []
  for (const e of entries) {
    const path = join(dir, e.name)
    if (e.isSymbolicLink()) {
      try {
        out.push({name: e.name, path, kind: 'symlink', target: readlinkSync(path)})
      } catch {
        // Gone since the listing: as if it had not been there.
      }
    } else out.push({name: e.name, path, kind: e.isDirectory() ? 'dir' : e.isFile() ? 'file' : 'other'})
  }
  return out
}

/** Something is at the path, and it is not a symlink: what a mount point can be made on as the host has it. */
export function isRealEntry(p: string): boolean {
  try {
    const st = lstatSync(p, {throwIfNoEntry: false})
    return st !== undefined && !st.isSymbolicLink()
  } catch {
    return false
  }
}
