import {lstatSync, readlinkSync, realpathSync, statSync} from 'node:fs'
import {dirname, join, normalize, relative, resolve} from 'node:path'
import {isWithin} from '../../../common/paths.js'
import {dirEntries, hostRootEntries, isRealEntry, type DirEntry} from './host-root.js'
import {devArgs, maskArgs, namespaceArgs} from './security-context.js'
import type {ContainerSandboxSpec} from './spec.js'
import {OwnTopLevel} from './root-layer.js'
import {pinMountPoints} from './mount-points.js'

/**
 * The bubblewrap command line of a sandboxed container.
 *
 * The container sees the host's filesystem, never writable. As root, with
 * a writable layer (root-layer.ts), the overlay of `/` is bound as the
 * view's root, and over it what that overlay does not show: the top-level
 * entries that are host mounts of their own (their own overlay, or
 * read-only). Otherwise bwrap starts from an empty tmpfs as the new root
 * and every top-level entry of the host's root is bound back in: a
 * directory the instance's writable layer covers from its overlay, every
 * other entry read-only. Either way a host mount below an overlaid
 * directory is bound back read-only when its filesystem is read-only, and
 * not shown otherwise (root-layer.ts hostMountsBelow: a unix socket on it
 * would connect through a read-only bind); /proc, /dev and /sys are the
 * sandbox's own. With readOnlyRootFilesystem the layer's overlays are made
 * read-only last, once every mount point on them is made. One bind of the
 * root instead of one per top-level entry matters: bwrap reads the whole
 * mount table after each bind, so a start's setup grows with the square of
 * its mounts (about 7.2 against 4.6 ms of CPU per start on a host with 25
 * top-level entries). A mount point that does not exist on the host (or
 * lies past a link into a hidden path, which the view never follows) is
 * made in the overlay when a layer covers it, in its upper directory
 * before the overlay is mounted, so nothing the host makes there meanwhile
 * is followed (mount-points.ts pinMountPoints); elsewhere it must never be
 * created on the host (bwrap would mkdir it through the bind, or fail on a
 * read-only one): the host directory that would receive
 * it is "shadowed" instead, a tmpfs at its place with each of its entries
 * bound back read-only, so the new mount point lives on that tmpfs. Hidden
 * paths (sandbox/hidden-paths.ts) come next: an empty tmpfs on a directory,
 * an empty file on a file, unless the overlay's layer of hidden paths shows
 * them empty already (hidden-layer.ts). Then the pod's own binds, shallowest
 * first, and /sys last.
 *
 * Namespaces: mount (always), PID (the program is PID 1, `--as-pid-1`, with
 * the kernel's PID-1 signal semantics; or the PID namespace of another
 * process), UTS (the pod's hostname). `--json-status-fd` tells the host pid
 * of PID 1 and its exit code, `--block-fd` holds the program until it is
 * placed in its cgroups (by the helper that started bwrap, else by vnode).
 */
export const BwrapProgram = 'bwrap'

/** File descriptors of the spawned bwrap (its stdio array). */
export const StatusFd = 3
export const BlockFd = 4
export const PidNamespaceFd = 5

export class MountPointError extends Error {}

export interface BwrapOptions {
  /** The working directory in the container's view. */
  cwd: string
  /** Hold the program until the block fd is written to. */
  block: boolean
}

export function bwrapArgs(spec: ContainerSandboxSpec, opts: BwrapOptions): string[] {
  // Looked at per start, one stat each: a credential location made after `up` is hidden from the next container. What
  // the overlay's layer of hidden paths shows empty already needs no mask (nor does anything inside it).
  const layerHides = spec.layerHides ?? []
  const masked = spec.hide.filter((h) => !underPrivate(h) && !layerHides.some((l) => isWithin(l, h)))
  const kinds = new Map(masked.map((h) => [h, statKind(h)] as const))
  const hidden = [...layerHides, ...[...kinds.keys()].filter((h) => kinds.get(h) !== undefined)]
  const targets = spec.binds.map((b) => ({...b, target: viewPath(b.target, hidden)}))
  const overlaid = new Map((spec.rootLayer?.overlays ?? []).map((o) => [o.path, o.merged]))
  const shadows = shadowDirs(
    targets.map((t) => t.target),
    hidden,
    [...overlaid.keys()],
    spec.rootLayer?.subMounts,
  )
  // The listing says which entries are links: only those are resolved, not every entry lstat'ed again per start.
  const listed = hostRootEntries()
  // A top-level link a target still runs through is one its plan did not follow: none was there then, or it led into a
  // hidden path. It stays out of the view, and so does a link into a hidden path.
  const targetTops = new Set(targets.map((t) => topLevelName(t.target)))
  const root = listed.filter((e) => e.kind !== 'symlink' || !(targetTops.has(e.name) || linkIntoHidden(e.path, hidden)))
  const layer = spec.rootLayer
  // The overlay of `/` as the view's root, unless a top-level link must be left out of the view (the overlay would show it).
  const rootOverlay = layer?.root && root.length === listed.length ? layer.root : undefined
  if (layer) pinMountPoints(layer, targets, {rootShown: rootOverlay !== undefined, hidden})
  const args: string[] = rootOverlay ? ['--bind', rootOverlay, '/', ...overRootOverlay(root, rootOverlay, layer!.topMounts, overlaid)] : rootEntries(root, OwnTopLevel, overlaid)
  // The overlays bound at their own places (a mount each): every one on bwrap's tmpfs root, those outside the overlay of `/` over it.
  const boundOverlays = root.filter((e) => !OwnTopLevel.has(e.name) && overlaid.has(e.path) && !(rootOverlay && isWithin(rootOverlay, overlaid.get(e.path)!))).map((e) => e.path)
  // What is mounted below an overlaid directory, seen through no overlay: a read-only filesystem bound back, read-only;
  // a writable one that such a bind carries along, masked (its unix sockets would reach the host: root-layer.ts
  // hostMountsBelow). A hidden one is masked next.
  for (const m of spec.rootLayer?.subMounts ?? []) if (!hidden.some((h) => isWithin(h, m))) args.push('--ro-bind-try', m, m)
  for (const m of spec.rootLayer?.maskedMounts ?? []) if (!hidden.some((h) => isWithin(h, m))) args.push('--tmpfs', m)
  args.push('--proc', '/proc', ...devArgs(spec), '--tmpfs', '/dev/shm', ...maskArgs(spec, '/proc'))
  for (const s of shadows) args.push('--tmpfs', s, ...rootEntries(shadowEntries(s, targets), new Set(), new Map()))
  const masks = (inSys: boolean) => {
    for (const [h, kind] of kinds) {
      if (isWithin('/sys', h) !== inSys) continue
      if (kind === 'dir') args.push('--tmpfs', h)
      else if (kind === 'file') args.push('--ro-bind', spec.emptyFile ?? DefaultEmptyFile, h)
    }
  }
  masks(false)
  for (const t of [...targets].sort((a, b) => depth(a.target) - depth(b.target))) {
    args.push(t.readOnly ? '--ro-bind' : '--bind', t.source, t.target)
  }
  // /sys after every other bind (no volume goes below it: viewPath): its bind brings the host's mounts below it (a
  // dozen cgroup hierarchies on cgroup v1), and bwrap reads the whole mount table again after each bind.
  args.push('--ro-bind', '/sys', '/sys', ...maskArgs(spec, '/sys'))
  masks(true)
  // No writable layer (none can be built): the view's own tmpfs root and shadows become read-only too, once every
  // mount point on them is made, so a write fails with EROFS. readOnlyRootFilesystem: the same for the layer's
  // overlays (its root, or the tmpfs root and each overlay bound on it): the host's files are still seen through
  // them, never bound directly, so its unix sockets stay dead files there as well.
  if (!spec.rootLayer) for (const d of ['/', ...shadows]) args.push('--remount-ro', d)
  else if (spec.readOnlyRoot) for (const d of ['/', ...boundOverlays, ...shadows]) args.push('--remount-ro', d)
  args.push(...namespaceArgs(spec, PidNamespaceFd), '--chdir', opts.cwd, '--json-status-fd', String(StatusFd))
  if (opts.block) args.push('--block-fd', String(BlockFd))
  return args
}

/**
 * What is bound over the overlay of `/` bound as the view's root: the
 * top-level entries that are host mounts of their own, which the overlay
 * does not show (it shows the root filesystem only): an overlay of their
 * own when they have one, read-only otherwise. Everything else of `/` is
 * the overlay's already.
 */
function overRootOverlay(entries: DirEntry[], rootOverlay: string, topMounts: string[], overlaid: Map<string, string>): string[] {
  const mounted = new Set(topMounts)
  const out: string[] = []
  for (const e of entries) {
    if (OwnTopLevel.has(e.name)) continue
    const merged = overlaid.get(e.path)
    if (merged !== undefined && isWithin(rootOverlay, merged)) continue
    if (merged !== undefined) out.push('--bind', merged, e.path)
    else if (mounted.has(e.path)) out.push(e.kind === 'dir' || e.kind === 'file' ? '--ro-bind' : '--ro-bind-try', e.path, e.path)
  }
  return out
}

/** What a hidden file is replaced by when the spec names no empty file of its own. */
export const DefaultEmptyFile = '/dev/null'

/** Binds (or symlinks) every entry of a host directory back at the same path: read-only, or its overlay's merged directory. */
function rootEntries(entries: DirEntry[], skip: Set<string>, overlaid: Map<string, string>): string[] {
  const out: string[] = []
  for (const e of entries) {
    if (skip.has(e.name)) continue
    const merged = overlaid.get(e.path)
    if (e.kind === 'symlink') out.push('--symlink', e.target!, e.path)
    else if (merged) out.push('--bind', merged, e.path)
    else if (e.kind === 'dir' || e.kind === 'file') out.push('--ro-bind', e.path, e.path)
    else out.push('--ro-bind-try', e.path, e.path)
  }
  return out
}

/**
 * A target as the container's view resolves it: symlinks of the host
 * followed in the part that exists (the view's root is the host's), so the
 * mount lands where a process in the container will look. Refuses targets
 * bwrap cannot mount on, with the reason a runtime would give. A path that
 * vanishes while it is resolved (a link another node makes and removes
 * with its pod) counts as not there: the walk goes on from its parent.
 */
export function viewPath(target: string, hidden: string[]): string {
  const t = normalize(target)
  if (isWithin('/proc', t) || isWithin('/sys', t)) throw new MountPointError(`mount destination ${t} is in a kernel filesystem (/proc or /sys): not allowed`)
  if (underPrivate(t) || hidden.some((h) => isWithin(h, t))) return t
  let existing = t
  for (let walks = 0; walks < MaxResolveWalks; walks++) {
    while (existing !== '/' && !lexists(existing)) existing = dirname(existing)
    const real = resolvedDir(existing, existing !== t)
    if (real === 'gone') existing = dirname(existing)
    if (real === 'gone' || real === 'changed') continue
    if (real === 'not a directory') throw new MountPointError(`mount destination ${t}: ${existing} is not a directory`)
    if (real === undefined) break
    const resolved = join(real, relative(existing, t))
    // A link on the way into a hidden path is not followed: the mount point is made at the target itself, over the link
    // (mount-points.ts pinMountPoints; a top-level one is left out of the view). Such links are made by a plain-mode node
    // running as root (volumes.ts: a real symlink at a mountPath, into that node's pod directory), which no other node's
    // container may follow: through the host's owner-only directories its user could not reach its own volume.
    if (hidden.some((h) => isWithin(h, resolved))) return t
    return resolved === t ? resolved : viewPath(resolved, hidden)
  }
  throw new MountPointError(`mount destination ${t}: ${existing} cannot be resolved`)
}

/** How many times a target's walk starts again while the paths on its way keep changing under it. */
const MaxResolveWalks = 100

/**
 * A path's real path, checked to be a directory when something lies below it. When it cannot be resolved: 'gone' if
 * it is no longer there, 'changed' if it resolves now (a link made again meanwhile), undefined if it cannot (a dangling
 * link: refused).
 */
function resolvedDir(p: string, mustBeDir: boolean): string | 'gone' | 'changed' | 'not a directory' | undefined {
  try {
    const real = realpathSync(p)
    if (mustBeDir && !statSync(real).isDirectory()) return 'not a directory'
    return real
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || p === '/') return undefined
    if (!lexists(p)) return 'gone'
    let to: string
    try {
      to = readlinkSync(p)
    } catch {
      // Not a link (any more): what changed was on its way.
      return 'changed'
    }
    return lexists(resolve(dirname(p), to)) ? 'changed' : undefined
  }
}

/**
 * The host directories to shadow: for each target missing on the host, the
 * deepest existing directory above it, unless that is already a tmpfs of
 * the view (the root, /dev, a hidden or shadowed directory), in a writable
 * layer's overlay, or inside another target (a volume: its mount point is
 * made there, as a runtime does).
 */
export function shadowDirs(targets: string[], hidden: string[], overlaid: string[] = [], subMounts: string[] = []): string[] {
  const out = new Set<string>()
  for (const t of targets) {
    // A link still on a target's way is one the view does not follow (viewPath): its place is made as a missing one's.
    if (isRealEntry(t) || underPrivate(t) || hidden.some((h) => isWithin(h, t))) continue
    let parent = dirname(t)
    while (parent !== '/' && !isRealEntry(parent)) parent = dirname(parent)
    // In an overlay a mount point is made in the layer; a host mount bound back below it is read-only, as the rest of the host.
    const inLayer = overlaid.some((o) => isWithin(o, parent)) && !subMounts.some((m) => isWithin(m, parent))
    if (parent === '/' || inLayer || targets.some((o) => o !== t && isWithin(o, parent))) continue
    out.add(parent)
  }
  return [...out].sort((a, b) => depth(a) - depth(b))
}

/** The first element of an absolute path (`scratch` of `/scratch/a`); empty for `/`. */
function topLevelName(p: string): string {
  return p.split('/').find(Boolean) ?? ''
}

function underPrivate(p: string): boolean {
  return isWithin('/dev', p) || isWithin('/proc', p)
}

function depth(p: string): number {
  return p === '/' ? 0 : p.split('/').length - 1
}

/** A symlink (known to be one) whose resolution lies in a hidden path; one that cannot be resolved does not. */
function linkIntoHidden(link: string, hidden: string[]): boolean {
  try {
    const real = realpathSync(link)
    return hidden.some((h) => isWithin(h, real))
  } catch {
    return false
  }
}

/** A shadowed directory's entries, bound back: a link in it that a target runs through is one the view does not follow (viewPath), left out. */
function shadowEntries(dir: string, targets: readonly {target: string}[]): DirEntry[] {
  return dirEntries(dir).filter((e) => e.kind !== 'symlink' || !targets.some((t) => isWithin(e.path, t.target)))
}

function lexists(p: string): boolean {
  try {
    return lstatSync(p, {throwIfNoEntry: false}) !== undefined
  } catch {
    return false
  }
}

/** What a hidden path is on the host (symlinks followed): a directory gets a tmpfs, anything else an empty file; nothing when missing. */
/** Most hidden paths do not exist on a host: those are answered without an exception (one per path per start). */
function statKind(p: string): 'dir' | 'file' | undefined {
  try {
    const st = statSync(p, {throwIfNoEntry: false})
    return st === undefined ? undefined : st.isDirectory() ? 'dir' : 'file'
  } catch {
    return undefined
  }
}
