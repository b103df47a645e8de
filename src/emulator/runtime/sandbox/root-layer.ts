import {randomBytes} from 'node:crypto'
import {chmodSync, readdirSync, rmSync} from 'node:fs'
import {chmod, chown, mkdir, readdir, rename, rm, stat, writeFile} from 'node:fs/promises'
import {basename, dirname, join} from 'node:path'
import {hostProgram} from '../process/host-programs.js'
import {hostRootEntries} from './host-root.js'
import {recentMountTable, type MountEntry} from './mountinfo.js'

/**
 * A container instance's writable layer over the host's root filesystem:
 * kernel overlays (lower: the host's, read-only; upper and work: the
 * instance's, in the pod's state dir; see prepareRootLayer for which),
 * mounted in a mount namespace of the instance's own just before
 * bwrap starts, which binds them into the view (as root, the overlay of
 * `/` as the view's root: bwrap.ts). Nothing is mounted in the
 * host's namespace: the overlays go when the instance's last process does,
 * and its upper directory is removed when the next instance starts.
 *
 * Inside a user namespace (the unprivileged mode) the kernel refuses `/`
 * as a lower layer (/proc, /sys, /dev are locked mounts below it): there,
 * one overlay per top-level directory that has no host mount below it
 * (the kernel refuses some there); one that has is bound read-only. As
 * root, an overlay shows its lower filesystem only, not what is mounted
 * below it: of those mounts (another disk under /mnt, a tmpfs under /tmp),
 * the read-only filesystems are bound back at their places on top of the
 * overlay (`subMounts`), and the writable ones are not shown
 * (hostMountsBelow), so the directory stays writable and no host socket
 * is reachable through the view. A single overlay (as root, the
 * usual case) is mounted by one `mount -t overlay`; several by one
 * `mount -a` over an fstab of the instance's own.
 */

/** Top-level directories never overlaid: the sandbox makes its own. */
export const OwnTopLevel = new Set(['proc', 'dev', 'sys'])

const MountProgram = 'mount'
export const UnshareProgram = 'unshare'
export const SetprivProgram = 'setpriv'
export const ShellProgram = 'sh'

/**
 * The step between the instance's new mount namespace and bwrap: mount the
 * layer, then exec the rest of the argv. Fixed scripts: mount(8) by its
 * absolute path, the overlay's options and target (or the fstab) and the
 * command are arguments, never parsed by the shell, so no container data
 * reaches the shell's own parser, and the container's PATH (the spawn's
 * env) never chooses the program that runs as root there. One overlay is
 * mounted directly: `mount -a` would parse the fstab and scan mountinfo for
 * what is mounted already, at every start.
 */
export const LayerScripts = {
  one: '"$1" -t overlay overlay -o "$2" "$3" || exit 125; shift 3; exec "$@"',
  all: '"$1" -a -T "$2" || exit 125; shift 2; exec "$@"',
} as const

/** How the layer's mount namespace is made: as root, or in a user namespace mapping vnode's uid and gid (unprivileged). */
export type LayerMode = 'root' | 'user-namespace'

export interface RootLayer {
  /** The instance's layer directory (upper/, work/, merged/, fstab). */
  dir: string
  /** Overlaid top-level directories: the host path, its merged directory to bind in its place, and its upper directory (that directory's own in it). */
  overlays: {path: string; merged: string; upper: string}[]
  /** The host's mounts below overlaid directories that the view shows (hostMountsBelow): bound back read-only over the overlays. */
  subMounts: string[]
  /** Mounts of writable filesystems that a rebound mount (or a directory bound read-only whole) carries along: each masked by an empty tmpfs. */
  maskedMounts: string[]
  /** Each overlay mount: its mount(8) options and its merged directory. */
  mounts: {options: string; target: string}[]
  /** With several mounts, the fstab that mounts them all in one `mount -a`. */
  fstab?: string
  mode: LayerMode
  /**
   * As root: the overlay of `/` itself (merged/), which a start can bind as
   * the view's root in one bind, where binding each top-level directory
   * from it takes one each (bwrap.ts).
   */
  root?: string
  /** The upper directory of the overlay of `/` (with `root`): what the instance writes there, and the mount points made ahead (mount-points.ts). */
  rootUpper?: string
  /** The top-level entries of `/` that are host mounts of their own: the overlay of `/` shows what lies under them, so they are bound over it. */
  topMounts: string[]
}

export class RootLayerError extends Error {}

/** The top-level directories of the host's root an overlay covers. */
export function topLevelDirs(): {overlay: string[]} {
  // The listing of `/` is kept while `/` is unchanged (host-root.ts); the mounts below are read per start (hostMountsBelow).
  const overlay = hostRootEntries()
    .filter((e) => e.kind === 'dir' && !OwnTopLevel.has(e.name))
    .map((e) => e.path)
    .sort()
  return {overlay}
}

/**
 * The mount points strictly below one of dirs and below no other such mount point (a bind of those is recursive).
 * Both lists are normalized absolute paths (the root's listing, mountinfo's): compared as strings, since a node with a pod
 * network has hundreds of mount points (one per network namespace) and this runs at every start.
 */
export function topmostBelow(dirs: string[], mountPoints: string[]): string[] {
  const below = [...new Set(mountPoints)].filter((m) => dirs.some((d) => m !== d && under(d, m))).sort()
  // Sorted, a mount point's ancestors among them come before it.
  const topmost: string[] = []
  for (const m of below) if (!topmost.some((o) => under(o, m))) topmost.push(m)
  return topmost
}

/**
 * Which host mounts below the view's directories a container sees. An
 * overlay shows its lower filesystem only, so a mount below an overlaid
 * directory is in the view only if it is bound back; one below a directory
 * bound read-only whole (`carriers`: the unprivileged mode's) comes along
 * with it. Bound back, read-only and with what is below it, is a mount whose
 * filesystem is read-only. A mount of a writable filesystem is not shown:
 * through a read-only bind a process still connects to the unix sockets on
 * it (the kernel checks no mount flag for a connect), a container runtime's,
 * a session's bus or an ssh agent's, which would reach the host past every
 * wall; its place shows the directory under it, through the overlay, where
 * a socket is a dead file (the overlay's inode, not the socket's). Where a
 * shown mount carries one along, it is masked by an empty tmpfs. The network
 * namespaces' files are never shown (the mount base has none).
 */
export function hostMountsBelow(overlaid: string[], table: readonly MountEntry[], carriers: string[] = []): {rebound: string[]; masked: string[]} {
  const byPoint = new Map(table.map((e) => [e.point, e] as const))
  const dirs = [...overlaid, ...carriers]
  // Sorted, a mount point's ancestors come before it.
  const below = [...byPoint.values()].filter((e) => e.fsType !== 'nsfs' && dirs.some((d) => e.point !== d && under(d, e.point))).sort((a, b) => (a.point < b.point ? -1 : a.point > b.point ? 1 : 0))
  const state = new Map<string, 'shown' | 'masked' | 'unseen'>(carriers.map((c) => [c, 'shown'] as const))
  const rebound: string[] = []
  const masked: string[] = []
  for (const e of below) {
    let parent: string | undefined
    for (const p of state.keys()) if (p !== e.point && under(p, e.point) && (parent === undefined || p.length > parent.length)) parent = p
    const parentState = parent === undefined ? undefined : state.get(parent)
    if (parentState === 'masked' || parentState === 'unseen') state.set(e.point, 'unseen')
    else if (parentState === 'shown') {
      state.set(e.point, e.readOnlyFs ? 'shown' : 'masked')
      if (!e.readOnlyFs) masked.push(e.point)
    } else if (e.readOnlyFs) {
      state.set(e.point, 'shown')
      rebound.push(e.point)
    } else state.set(e.point, 'unseen')
  }
  return {rebound, masked}
}

/** `p` is `dir` or below it, for normalized absolute paths. */
function under(dir: string, p: string): boolean {
  return p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`)
}

/** Characters an overlay option or an fstab field cannot carry unescaped. */
export const UnsafeInMountOptions = /[\s,:\\]/

/**
 * Makes a fresh layer for an instance at `dir` (whatever an earlier
 * instance left there is moved aside first), and how to mount it.
 *
 * As root, one overlay of `/` (upper/, work/, merged/) covers every
 * top-level directory on the root filesystem (merged/ bound as the view's root, or merged/<name> at each place: bwrap.ts): a
 * directory's attributes come from the host's until the instance writes
 * there, so nothing is copied per directory, and the kernel mounts one
 * overlay instead of one per directory (each costs about half a
 * millisecond at a start). A top-level directory that is a mount of its
 * own is not in that overlay's lower layer: it gets an overlay of its own
 * under mounts/<name>/. In a user namespace the kernel refuses `/` as a
 * lower layer (the host's locked mounts are below it): an overlay per
 * top-level directory, each upper's root with the host directory's mode
 * (an overlay's root takes its upper's: /tmp stays 1777).
 *
 * Asynchronous: a burst of starts makes its layers on libuv's threads,
 * not on the event loop every other pod's sync and status write waits on.
 */
export async function prepareRootLayer(dir: string, mode: LayerMode, dirs?: string[], table: readonly MountEntry[] = recentMountTable().entries): Promise<RootLayer> {
  if (UnsafeInMountOptions.test(dir)) throw new RootLayerError(`the state dir path ${dir} has a character an overlay mount option cannot carry (space, comma, colon or backslash)`)
  await retireRootLayer(dir)
  await mkdir(dir, {recursive: true, mode: 0o700})
  const mountPoints = table.map((m) => m.point)
  const overlays: RootLayer['overlays'] = []
  const planned: {base: string; lower: string; name?: string}[] = []
  // In a user namespace the kernel refuses an overlay of a directory with some host mounts below it
  // (seen with /mnt and /run): such a directory is bound read-only there, as the rest of the host.
  const candidates = dirs ?? topLevelDirs().overlay
  const safe = candidates.filter((path) => !UnsafeInMountOptions.test(path) && (mode === 'root' || topmostBelow([path], mountPoints).length === 0))
  const below = hostMountsBelow(
    safe,
    table,
    candidates.filter((path) => !safe.includes(path)),
  )
  const ownMount = new Set(mountPoints)
  const onRoot = mode === 'root' ? safe.filter((path) => !ownMount.has(path)) : []
  const root = onRoot.length > 0 ? join(dir, 'merged') : undefined
  const rootUpper = onRoot.length > 0 ? join(dir, 'upper') : undefined
  if (onRoot.length > 0) {
    planned.push({base: dir, lower: '/'})
    for (const path of onRoot) overlays.push({path, merged: join(dir, 'merged', path.slice(1)), upper: join(dir, 'upper', path.slice(1))})
  }
  for (const path of safe) {
    if (onRoot.includes(path)) continue
    const base = mode === 'root' ? join(dir, 'mounts', path.slice(1)) : undefined
    planned.push(base === undefined ? {base: dir, lower: path, name: path.slice(1)} : {base, lower: path})
    overlays.push({path, merged: base ? join(base, 'merged') : join(dir, 'merged', path.slice(1)), upper: base ? join(base, 'upper') : join(dir, 'upper', path.slice(1))})
  }
  const overlayMounts = await Promise.all(planned.map((o) => makeOverlay(o.base, o.lower, mode, o.name)))
  let fstab: string | undefined
  if (overlayMounts.length > 1) {
    fstab = join(dir, 'fstab')
    await writeFile(fstab, overlayMounts.map((m) => `overlay ${m.target} overlay ${m.options} 0 0\n`).join(''), {mode: 0o600})
  }
  const topMounts = [...ownMount].filter((m) => m !== '/' && dirname(m) === '/' && !OwnTopLevel.has(m.slice(1))).sort()
  return {dir, overlays, subMounts: below.rebound, maskedMounts: below.masked, mounts: overlayMounts, ...(fstab ? {fstab} : {}), mode, ...(root && rootUpper ? {root, rootUpper} : {}), topMounts}
}

/**
 * One overlay's upper, work and merged directories (under `base`, or
 * `base/<kind>/<name>`), the upper's root with the lower's mode and owner
 * (read per start: the host's directory may have changed), and its mount.
 */
async function makeOverlay(base: string, lower: string, mode: LayerMode, name?: string): Promise<{options: string; target: string}> {
  const [upper, work, merged] = ['upper', 'work', 'merged'].map((kind) => (name === undefined ? join(base, kind) : join(base, kind, name)))
  const [st] = await Promise.all([stat(lower), Promise.all([upper!, work!, merged!].map((d) => mkdir(d, {recursive: true, mode: 0o700})))])
  if (mode === 'root') await chown(upper!, st.uid, st.gid)
  await chmod(upper!, st.mode & 0o7777)
  // userxattr: the overlay's own attributes in user.* where trusted.* needs the host's root.
  return {options: `lowerdir=${lower},upperdir=${upper},workdir=${work}${mode === 'user-namespace' ? ',userxattr' : ''}`, target: merged!}
}

/**
 * The layer with `lower` as the top lower layer of its overlay of `/` (the
 * mount base's layer of hidden paths, hidden-layer.ts): the host's `/`
 * stays the lowest, so what `lower` holds shows over it.
 */
export function withTopLower(layer: RootLayer, lower: string): RootLayer {
  return {...layer, mounts: layer.mounts.map((m) => (m.target === layer.root ? {...m, options: m.options.replace(/^lowerdir=\/,/, `lowerdir=${lower}:/,`)} : m))}
}

/**
 * The argv prefix that runs a command (bwrap) with the layer mounted: a new
 * mount namespace, the layer's overlays mounted in it, then the command. In a user
 * namespace the mounts need capabilities there, which bwrap (not setuid)
 * refuses to start with: setpriv clears them before it.
 */
export function layerPrefix(layer: RootLayer): string[] {
  const [one] = layer.mounts
  const mount = hostProgram(MountProgram)
  const script =
    layer.mounts.length === 1 && one
      ? [hostProgram(ShellProgram), '-c', LayerScripts.one, 'vnode-layer', mount, one.options, one.target]
      : [hostProgram(ShellProgram), '-c', LayerScripts.all, 'vnode-layer', mount, layer.fstab ?? '/dev/null']
  if (layer.mode === 'root') return [hostProgram(UnshareProgram), '--mount', '--propagation', 'private', '--', ...script]
  const uid = String(process.getuid?.() ?? 0)
  const gid = String(process.getgid?.() ?? 0)
  return [
    hostProgram(UnshareProgram),
    '--user',
    `--map-user=${uid}`,
    `--map-group=${gid}`,
    '--keep-caps',
    '--mount',
    '--propagation',
    'private',
    '--',
    ...script,
    hostProgram(SetprivProgram),
    '--inh-caps=-all',
    '--ambient-caps=-all',
    '--',
  ]
}

/**
 * Removes a layer. An overlay's work directory holds a `work/` of mode 000
 * (the kernel's): opened up first, so a user without privileges can remove
 * its own.
 */
export function removeRootLayer(dir: string): void {
  openWorkDirs(dir)
  rmSync(dir, {recursive: true, force: true})
}

function openWorkDirs(dir: string): void {
  const works = [join(dir, 'work'), ...subdirs(join(dir, 'work')), ...subdirs(join(dir, 'mounts')).map((m) => join(m, 'work'))]
  for (const w of works) {
    try {
      chmodSync(join(w, 'work'), 0o700)
    } catch {
      /* not there */
    }
  }
}

/** Layers of earlier instances being removed in the background, by their path. */
const retiring = new Map<string, Promise<void>>()
const RetiredMark = '.retired-'

/**
 * Moves an earlier instance's layer aside (one rename) and removes it in the
 * background: what a container wrote may be gigabytes, and removing it on
 * the next instance's start path would hold up the start and every other
 * pod of the node. Layers retired by an earlier vnode process and never
 * removed (it stopped first) go the same way.
 */
export async function retireRootLayer(dir: string): Promise<void> {
  const parent = dirname(dir)
  const name = basename(dir)
  const leftovers = (await readdir(parent).catch(() => [] as string[])).map((n) => join(parent, n)).filter((d) => basename(d).startsWith(`${name}${RetiredMark}`) && !retiring.has(d))
  const aside = `${dir}${RetiredMark}${randomBytes(4).toString('hex')}`
  try {
    await rename(dir, aside)
    leftovers.push(aside)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') removeRootLayer(dir)
  }
  for (const d of leftovers) {
    const removal = (async () => {
      openWorkDirs(d)
      await rm(d, {recursive: true, force: true})
    })()
      .catch(() => undefined)
      .finally(() => retiring.delete(d))
    retiring.set(d, removal)
  }
}

/** Settles once every layer retired so far is removed (before its pod's directory goes, and for tests). */
export async function retiredLayersRemoved(): Promise<void> {
  await Promise.all([...retiring.values()])
}

/** How many retired layers are still being removed (the node's stats: it must drain to 0). */
export function retiringLayers(): number {
  return retiring.size
}

/** What a layer's instance wrote: its upper directories (and the own overlays of top-level mounts, under mounts/). */
export function layerWrittenDirs(dir: string): string[] {
  return [join(dir, 'upper'), join(dir, 'mounts')]
}

function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir).map((name) => join(dir, name))
  } catch {
    return []
  }
}
