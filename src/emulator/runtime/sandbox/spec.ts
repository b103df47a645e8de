import {isAbsolute, join, normalize, relative, sep} from 'node:path'

/**
 * What a sandboxed container runs inside (namespaces mode). The host's root
 * filesystem stays the container's root: its programs, libraries and
 * toolchains are the user's own. On top of it the container gets what a
 * container runtime gives it: volumes at their mountPaths, the pod's
 * /etc/hosts, /etc/resolv.conf and /etc/hostname, a termination message
 * file, its own /dev and /proc, its own PID and UTS namespaces. /tmp is the
 * host's, as the rest of its filesystem: the user's programs meet there.
 */
export interface ContainerSandboxSpec {
  hostname: string
  /** Bind mounts, in the container's view; a later target may sit inside an earlier one. */
  binds: SandboxBind[]
  /** Host directories masked by an empty tmpfs (vnode's state dir: other pods' volumes and logs). */
  hide: string[]
  /** Join the PID namespace of this host process instead of a new one (shareProcessNamespace). */
  pidNamespaceOf?: number
  /** A network namespace to run in (its bind-mounted path); the host's network when unset. */
  netns?: string
  /** bwrap's own reaper is PID 1 and the program its child (a pod's shared PID namespace holder). */
  init?: boolean
}

export interface SandboxBind {
  /** A path on the host. */
  source: string
  /** Where the container sees it: an absolute path in its view. */
  target: string
  readOnly: boolean
}

/** The sandbox modes a node can run in: `none` is a bare host process. */
export type SandboxMode = 'namespaces' | 'none'
export type SandboxRequest = SandboxMode | 'auto'
export const SandboxModes: readonly SandboxRequest[] = ['auto', 'namespaces', 'none']

/** The node label saying which mode its pods run in. */
export const SandboxLabel = 'vnode.dev/sandbox'

/** Directories a container always gets fresh, never the host's. */
export const PrivateDirs = ['/proc', '/dev'] as const

/**
 * Where a path of the container's view is on the host: under the deepest
 * bind whose target contains it, else the host path itself (the view's root
 * is the host's). Paths in private directories have no host counterpart.
 */
export function hostPathOf(spec: ContainerSandboxSpec, path: string): string | undefined {
  const p = normalize(path)
  let best: SandboxBind | undefined
  for (const b of spec.binds) {
    if (isWithin(b.target, p) && (!best || b.target.length > best.target.length)) best = b
  }
  if (best) return join(best.source, relative(best.target, p))
  if (PrivateDirs.some((d) => isWithin(d, p))) return undefined
  return p
}

/** `child` is `parent` or below it. */
export function isWithin(parent: string, child: string): boolean {
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}
