import {join, normalize, relative} from 'node:path'
import {isWithin} from '../../../common/paths.js'
import type {LayerMode, RootLayer} from './root-layer.js'
import type {ContainerSecurity} from '../container/security-context.js'

/**
 * What a sandboxed container runs inside (namespaces mode). The host's root
 * filesystem stays the container's root: its programs, libraries and
 * toolchains are the user's own. On top of it the container gets what a
 * container runtime gives it: volumes at their mountPaths, the pod's
 * /etc/hosts, /etc/resolv.conf and /etc/hostname, a termination message
 * file, its own /dev and /proc, its own PID and UTS namespaces. The host's
 * files are read-only: what the container writes outside its volumes goes
 * to its instance's writable layer (root-layer.ts), or nowhere with
 * readOnlyRootFilesystem (EROFS).
 */
export interface ContainerSandboxSpec {
  hostname: string
  /** Bind mounts, in the container's view; a later target may sit inside an earlier one. */
  binds: SandboxBind[]
  /** Host paths masked: a directory by an empty tmpfs, a file by an empty file (hidden-paths.ts: state dirs, credentials). */
  hide: string[]
  /** The empty file a hidden file is replaced by. */
  emptyFile?: string
  /** Hidden paths the writable layer's overlay already shows empty (its mount base's layer, hidden-layer.ts): no mask for them. */
  layerHides?: string[]
  /** The instance's writable layer; without one the host's files are all read-only. */
  rootLayer?: RootLayer
  /** readOnlyRootFilesystem: the layer's overlays are made read-only in the view (writes fail with EROFS). */
  readOnlyRoot?: boolean
  /** Join the PID namespace of this host process instead of a new one (shareProcessNamespace). */
  pidNamespaceOf?: number
  /** A network namespace to run in (its bind-mounted path); the host's network when unset. */
  netns?: string
  /** The mount namespace the setup starts from (mount-base.ts: the host's without network namespace files); the host's when unset. */
  mountBase?: string
  /** bwrap's own reaper is PID 1 and the program its child (a pod's shared PID namespace holder). */
  init?: boolean
  /** securityContext and host namespaces (security-context.ts); unset: the pod's own namespaces, vnode's identity. */
  security?: SandboxSecurity
}

export interface SandboxBind {
  /** A path on the host. */
  source: string
  /** Where the container sees it: an absolute path in its view. */
  target: string
  readOnly: boolean
}

/** What a node's sandbox walls off, the same for every container: set at `up`. */
export interface SandboxWalls {
  /** How a container's writable layer is built (detect.ts); unset: none can be, the host's files are read-only. */
  layer?: LayerMode
  /** Host paths hidden from every container (hidden-paths.ts), beside the node's own state dir. */
  hide: string[]
  /** The empty file a hidden file is replaced by. */
  emptyFile?: string
}

/** The sandbox modes a node can run in: `none` is a bare host process. */
export type SandboxMode = 'namespaces' | 'none'
export type SandboxRequest = SandboxMode | 'auto'

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

/** What the kubelet decides of a pod's namespaces and a container's identity. */
export interface SandboxSecurity {
  context: ContainerSecurity
  /** setpriv applies the user, groups and capabilities (root only: unprivileged, bwrap's user namespace has vnode's user and no capabilities). */
  applyIdentity: boolean
  hostPID?: boolean
  hostIPC?: boolean
  hostNetwork?: boolean
}
