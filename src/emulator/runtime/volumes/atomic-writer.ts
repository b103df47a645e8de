import {removeTree} from '../../../common/remove-tree.js'
import {chmod, lstat, mkdir, mkdtemp, readFile, readdir, readlink, rename, rm, symlink, writeFile} from 'node:fs/promises'
import {dirname, join, normalize, relative, resolve, sep} from 'node:path'

/**
 * The kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go): a volume's
 * files live in a timestamped directory, `..data` is a symlink to it, and
 * each top-level path of the payload is a symlink through `..data`:
 *
 *   <dir>/..data -> ..2026_12_01_10_00_00.123456
 *   <dir>/key    -> ..data/key
 *
 * An update writes a new timestamped directory and swaps `..data` with one
 * rename, so a reader sees the old or the new content, never a mix. The
 * volume's top directory stays the same (it is what is bound or linked at
 * the mountPath); a subPath is resolved to the timestamped directory when
 * its container starts, so it keeps what it had (see pinSubPath).
 */
export const DataDirName = '..data'
const NewDataDirName = '..data_tmp'

export interface PayloadFile {
  /** Relative to the volume: no absolute path, no `..` element, not starting with `..`. */
  path: string
  content: string | Buffer
  mode: number
}

export class PayloadError extends Error {}

/** The kubelet's validatePath. */
export function payloadPathError(p: string): string | undefined {
  if (!p) return `invalid path: must not be empty: "${p}"`
  if (p.startsWith('/')) return `invalid path: must be relative path: ${p}`
  if (p.length > 4096) return 'invalid path: must be less than or equal to 4096 characters'
  const items = p.split('/')
  if (items.includes('..')) return `invalid path: must not contain '..': ${p}`
  if (items.some((i) => Buffer.byteLength(i) > 255)) return 'invalid path: filenames must be less than or equal to 255 characters'
  if (items[0].startsWith('..') && items[0].length > 2) return `invalid path: must not start with '..': ${p}`
  return undefined
}

/** The timestamped directory's name, as Go's "..2006_01_02_15_04_05." plus a random suffix. */
function timestampPrefix(now: Date): string {
  const p = (n: number) => String(n).padStart(2, '0')
  return `..${now.getUTCFullYear()}_${p(now.getUTCMonth() + 1)}_${p(now.getUTCDate())}_${p(now.getUTCHours())}_${p(now.getUTCMinutes())}_${p(now.getUTCSeconds())}.`
}

/**
 * Projects the payload into dir atomically; returns whether anything was
 * written (false: the content on disk was already this payload). Files get
 * their mode; directories inside the payload are read-only (0555, or 0500
 * when private: Secret content stays the owner's), and so is dir itself
 * once written.
 */
export async function writeAtomic(dir: string, files: PayloadFile[], opts: {private: boolean}): Promise<boolean> {
  const payload = new Map<string, PayloadFile>()
  for (const f of files) {
    const bad = payloadPathError(f.path)
    if (bad) throw new PayloadError(bad)
    const clean = normalize(f.path).replace(/\/+$/, '')
    payload.set(clean, {...f, path: clean})
  }
  const dirMode = opts.private ? 0o500 : 0o555
  await mkdir(dir, {recursive: true, mode: 0o700})
  await chmod(dir, 0o700)
  try {
    const dataLink = join(dir, DataDirName)
    const oldTs = await readlink(dataLink).catch(() => undefined)
    // A directory written before this layout (or by hand): start it over.
    if (oldTs === undefined) await clearDir(dir)
    const oldPaths = oldTs ? await walk(join(dir, oldTs)) : new Set<string>()
    const toRemove = [...oldPaths].filter((p) => !coveredBy(p, payload))
    const changed = oldTs === undefined || toRemove.length > 0 || (await differs(join(dir, oldTs), payload))
    if (changed) {
      const ts = await mkdtemp(join(dir, timestampPrefix(new Date())))
      await writePayload(ts, payload, dirMode)
      const tmpLink = join(dir, NewDataDirName)
      await rm(tmpLink, {force: true})
      await symlink(relative(dir, ts), tmpLink)
      await rename(tmpLink, dataLink)
    }
    await createUserVisible(dir, payload)
    for (const p of toRemove) if (!p.includes('/')) await rm(join(dir, p), {force: true})
    if (changed && oldTs) await removeTree(join(dir, oldTs))
    return changed
  } finally {
    await chmod(dir, dirMode)
  }
}

/** The path, or a directory above it, is in the payload. */
function coveredBy(p: string, payload: Map<string, PayloadFile>): boolean {
  for (const k of payload.keys()) if (k === p || k.startsWith(p + '/')) return true
  return false
}

async function differs(oldDir: string, payload: Map<string, PayloadFile>): Promise<boolean> {
  for (const f of payload.values()) {
    const onDisk = await readFile(join(oldDir, f.path)).catch(() => undefined)
    if (!onDisk || !onDisk.equals(Buffer.from(f.content))) return true
  }
  return false
}

async function writePayload(ts: string, payload: Map<string, PayloadFile>, dirMode: number): Promise<void> {
  const dirs = new Set<string>([ts])
  for (const f of payload.values()) {
    const target = resolve(ts, f.path)
    if (!target.startsWith(ts + sep)) throw new PayloadError(`path "${f.path}" leaves the volume`)
    const parent = dirname(target)
    await mkdir(parent, {recursive: true, mode: 0o700})
    for (let d = parent; d.startsWith(ts) && !dirs.has(d); d = dirname(d)) dirs.add(d)
    await writeFile(target, f.content, {mode: 0o600})
    await chmod(target, f.mode & 0o777)
  }
  // Deepest first: a read-only parent would forbid nothing here (we own it), but keep the order honest.
  for (const d of [...dirs].sort((a, b) => b.length - a.length)) await chmod(d, dirMode)
}

/** key -> ..data/key for each top-level path of the payload that has no link yet. */
async function createUserVisible(dir: string, payload: Map<string, PayloadFile>): Promise<void> {
  const tops = new Set([...payload.keys()].map((p) => p.split('/')[0]))
  for (const top of tops) {
    const link = join(dir, top)
    const st = await lstat(link).catch(() => undefined)
    if (st?.isSymbolicLink()) continue
    if (st) await removeTree(link)
    await symlink(join(DataDirName, top), link)
  }
}

/** Every path under dir, relative to it. */
async function walk(dir: string, prefix = ''): Promise<Set<string>> {
  const out = new Set<string>()
  const entries = await readdir(join(dir, prefix), {withFileTypes: true}).catch(() => [])
  for (const e of entries) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name
    out.add(rel)
    if (e.isDirectory()) for (const p of await walk(dir, rel)) out.add(p)
  }
  return out
}

async function clearDir(dir: string): Promise<void> {
  for (const e of await readdir(dir)) await removeTree(join(dir, e))
}

/** The timestamped directory dir's `..data` points at now, if dir is an atomic-writer volume. */
export async function currentDataDir(dir: string): Promise<string | undefined> {
  const ts = await readlink(join(dir, DataDirName)).catch(() => undefined)
  return ts ? join(dir, ts) : undefined
}
