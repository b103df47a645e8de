import {readFileSync} from 'node:fs'

/** One line of /proc/self/mountinfo: where it is mounted, its filesystem type and source. */
export interface MountEntry {
  /** The mount point, octal escapes (`\040` for a space) undone. */
  point: string
  fsType: string
  source: string
}

/** vnode's own mount table (its namespace is the host's); empty where it cannot be read. */
export function readMountinfo(): string {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return ''
  }
}

/** The entries of a mountinfo text: the fifth field, and the two after the ` - ` separator. */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = []
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ')
    if (!left || right === undefined) continue
    const point = (left.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (!point.startsWith('/')) continue
    const [fsType = '', source = ''] = right.split(' ')
    out.push({point, fsType, source})
  }
  return out
}
