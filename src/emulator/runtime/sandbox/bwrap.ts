import {type Dirent, lstatSync, readdirSync, readlinkSync, realpathSync, statSync} from 'node:fs'
import {dirname, join, normalize, relative} from 'node:path'
import {isWithin, type ContainerSandboxSpec} from './spec.js'

/**
 * The bubblewrap command line of a sandboxed container.
 *
 * bwrap starts from an empty tmpfs as the new root. Every top-level entry
 * of the host's root is bound back in, so the container sees the host's
 * filesystem; /proc and /dev are its own. A mount point that does
 * not exist on the host must never be created there (bwrap would mkdir it
 * through the bind): the host directory that would receive it is
 * "shadowed" instead, a tmpfs at its place with each of its entries bound
 * back, so the new mount point lives on that tmpfs. vnode's state dir is
 * hidden last, then the pod's own binds are applied, shallowest first.
 *
 * Namespaces: mount (always), PID (the program is PID 1, `--as-pid-1`, with
 * the kernel's PID-1 signal semantics; or the PID namespace of another
 * process), UTS (the pod's hostname). `--json-status-fd` tells the host pid
 * of PID 1 and its exit code, `--block-fd` holds the program until vnode
 * has placed it (cgroups).
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
  const hidden = spec.hide.filter((h) => !underPrivate(h) && exists(h))
  const targets = spec.binds.map((b) => ({...b, target: viewPath(b.target, hidden)}))
  const shadows = shadowDirs(
    targets.map((t) => t.target),
    hidden,
  )
  const args: string[] = [...rootEntries('/', new Set(['proc', 'dev', 'sys']))]
  args.push('--ro-bind', '/sys', '/sys', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/dev/shm')
  for (const s of shadows) args.push('--tmpfs', s, ...rootEntries(s, new Set()))
  for (const h of hidden) args.push('--tmpfs', h)
  for (const t of [...targets].sort((a, b) => depth(a.target) - depth(b.target))) {
    args.push(t.readOnly ? '--ro-bind' : '--bind', t.source, t.target)
  }
  if (spec.pidNamespaceOf) args.push('--pidns', String(PidNamespaceFd))
  else if (spec.init) args.push('--unshare-pid')
  else args.push('--unshare-pid', '--as-pid-1')
  args.push('--unshare-uts', '--hostname', spec.hostname, '--chdir', opts.cwd, '--json-status-fd', String(StatusFd))
  if (opts.block) args.push('--block-fd', String(BlockFd))
  return args
}

/** Binds (or symlinks) every entry of a host directory back at the same path. */
function rootEntries(dir: string, skip: Set<string>): string[] {
  let entries: Dirent[]
  try {
    entries = readdirSync(dir, {withFileTypes: true})
  } catch {
    return []
  }
  const out: string[] = []
  for (const e of entries) {
    if (skip.has(e.name)) continue
    const p = join(dir, e.name)
    if (e.isSymbolicLink()) out.push('--symlink', readlinkSync(p), p)
    else if (e.isDirectory() || e.isFile()) out.push('--bind', p, p)
    else out.push('--dev-bind-try', p, p)
  }
  return out
}

/**
 * A target as the container's view resolves it: symlinks of the host
 * followed in the part that exists (the view's root is the host's), so the
 * mount lands where a process in the container will look. Refuses targets
 * bwrap cannot mount on, with the reason a runtime would give.
 */
export function viewPath(target: string, hidden: string[]): string {
  const t = normalize(target)
  if (isWithin('/proc', t) || isWithin('/sys', t)) throw new MountPointError(`mount destination ${t} is in a kernel filesystem (/proc or /sys): not allowed`)
  if (underPrivate(t) || hidden.some((h) => isWithin(h, t))) return t
  let existing = t
  while (existing !== '/' && !lexists(existing)) existing = dirname(existing)
  const rest = relative(existing, t)
  let real: string
  try {
    real = realpathSync(existing)
  } catch {
    throw new MountPointError(`mount destination ${t}: ${existing} cannot be resolved`)
  }
  const resolved = join(real, rest)
  if (rest !== '') {
    let st
    try {
      st = statSync(real)
    } catch {
      throw new MountPointError(`mount destination ${t}: ${existing} cannot be resolved`)
    }
    if (!st.isDirectory()) throw new MountPointError(`mount destination ${t}: ${existing} is not a directory`)
  }
  if (resolved !== t) return viewPath(resolved, hidden)
  return resolved
}

/**
 * The host directories to shadow: for each target missing on the host, the
 * deepest existing directory above it, unless that is already a tmpfs of
 * the view (the root, /dev, a hidden or shadowed directory) or inside
 * another target (a volume: its mount point is made there, as a runtime does).
 */
export function shadowDirs(targets: string[], hidden: string[]): string[] {
  const out = new Set<string>()
  for (const t of targets) {
    if (lexists(t) || underPrivate(t) || hidden.some((h) => isWithin(h, t))) continue
    let parent = dirname(t)
    while (parent !== '/' && !lexists(parent)) parent = dirname(parent)
    if (parent === '/' || targets.some((o) => o !== t && isWithin(o, parent))) continue
    out.add(parent)
  }
  return [...out].sort((a, b) => depth(a) - depth(b))
}

function underPrivate(p: string): boolean {
  return isWithin('/dev', p) || isWithin('/proc', p)
}

function depth(p: string): number {
  return p === '/' ? 0 : p.split('/').length - 1
}

function lexists(p: string): boolean {
  try {
    lstatSync(p)
    return true
  } catch {
    return false
  }
}

function exists(p: string): boolean {
  try {
    statSync(p)
    return true
  } catch {
    return false
  }
}
