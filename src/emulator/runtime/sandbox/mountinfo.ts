import {readFileSync} from 'node:fs'

/** One line of /proc/self/mountinfo: where it is mounted, its filesystem type and source, and whether that filesystem is read-only. */
export interface MountEntry {
  /** The mount point, octal escapes (`\040` for a space) undone. */
  point: string
  fsType: string
  source: string
  /** The filesystem itself is read-only (its superblock's options), whatever the mount's own flags: nothing on it can be written through any mount. */
  readOnlyFs: boolean
}

/** vnode's own mount table (its namespace is the host's); empty where it cannot be read. */
export function readMountinfo(): string {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return ''
  }
}

/** The entries of a mountinfo text: the fifth field, and the three after the ` - ` separator. */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = []
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ')
    if (!left || right === undefined) continue
    const point = (left.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (!point.startsWith('/')) continue
    const [fsType = '', source = '', superOptions = ''] = right.split(' ')
    out.push({point, fsType, source, readOnlyFs: superOptions.split(',').includes('ro')})
  }
  return out
}

/**
 * How long one read of the mount table serves the starts after it. Each
 * sandboxed start needs it twice (the mount base's check, and the host's
 * mounts below the writable layer's directories), and on a pod network it
 * holds two lines per pod and pool entry: reading and parsing it cost about
 * 3.5 ms of CPU per start in a 100-pod burst, where a burst's starts come
 * milliseconds apart. A mount made or removed on the host within the window
 * reaches the starts after it, as if the start had come that much sooner.
 */
export const DefaultMountTableReuseMs = 50

/** A read of the mount table: its text and its entries. */
export interface MountTable {
  text: string
  entries: MountEntry[]
}

let recent: {at: number; table: MountTable} | undefined

/** vnode's mount table as read at most `reuseMs` ago (read again when older, or when the clock went back), parsed once. */
export function recentMountTable(now = Date.now(), reuseMs = DefaultMountTableReuseMs): MountTable {
  if (recent && now >= recent.at && now - recent.at < reuseMs) return recent.table
  const text = readMountinfo()
  const table = {text, entries: parseMountinfo(text)}
  recent = {at: now, table}
  return table
}
