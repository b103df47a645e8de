import type {V1Container, V1Pod} from '@kubernetes/client-node'
import type {ContainerSecurity} from '../container/security-context.js'
import type {SandboxMode, SandboxWalls} from './spec.js'
import {WallsAnnotation} from '../../../common/labels.js'

/**
 * Which walls this node can build around a container, and the refusal of a
 * spec that asks for one it cannot: such a container waits in
 * CreateContainerConfigError with a message naming the field, rather than
 * running without the wall. What a node cannot give any pod (its own PID
 * namespace in the plain mode, a seccomp filter) is in its list of walls:
 * the `vnode.dev/walls` annotation, the dashboard header, `pods -o wide`.
 */
export {WallsAnnotation}

export interface NodeWalls {
  sandbox: SandboxMode
  /** vnode's own user: what a container runs as by default, and the only one it may run as when vnode is not root. */
  uid: number
  gid: number
  groups: number[]
  /** Any user, group, supplementary groups and capability set (root with the sandbox: setpriv inside it). */
  identity: boolean
  /** Own PID, IPC and UTS namespaces per container, /proc masks, no_new_privs (bwrap). */
  namespaces: boolean
  /** A root filesystem that writes fail on (readOnlyRootFilesystem). */
  readOnlyRoot: boolean
  /** A writable layer of its own per container instance over the read-only host (root-layer.ts); without one the host's files are read-only in every container. */
  writableLayer: boolean
  /** State dirs, kubeconfigs and credential locations hidden from every container (hidden-paths.ts); without them only the node's own state dir is. */
  hiddenPaths: boolean
}

/** The walls of a node in this sandbox mode, run by this process's user. */
export function nodeWalls(sandbox: SandboxMode, uid = process.getuid?.() ?? 0, gid = process.getgid?.() ?? 0, groups = process.getgroups?.() ?? []): NodeWalls {
  const namespaces = sandbox === 'namespaces'
  return {
    sandbox,
    uid,
    gid,
    groups: [...new Set([gid, ...groups])],
    identity: namespaces && uid === 0,
    namespaces,
    readOnlyRoot: readOnlyRootSupported(sandbox),
    writableLayer: false,
    hiddenPaths: false,
  }
}

/**
 * The walls with the filesystem ones as `up` settled them (walls-fs.ts):
 * they depend on a trial in the node's state dir and on `--fs-walls`, not
 * on the mode alone, so a node whose overlay trial failed says it has no
 * writable layer rather than listing the walls of one that has.
 */
export function withFsWalls(w: NodeWalls, fs: SandboxWalls | undefined): NodeWalls {
  return {...w, writableLayer: w.namespaces && fs?.layer !== undefined, hiddenPaths: w.namespaces && fs !== undefined}
}

/**
 * Whether a read-only root filesystem can be given: in a sandbox the
 * container's view of the host is read-only, and its writable layer (when
 * detect.ts's detectRootLayer finds one can be built) is what
 * readOnlyRootFilesystem leaves out (container-view.ts). A bare process has
 * the host's root as it is.
 */
export function readOnlyRootSupported(sandbox: SandboxMode): boolean {
  return sandbox === 'namespaces'
}

/** The walls' names, in the annotation's order: what a pod on this node gets. */
export function wallNames(w: NodeWalls): string[] {
  const out: string[] = []
  if (w.namespaces) out.push('mount', 'pid', 'ipc', 'uts', 'no-new-privs', 'proc-masks')
  if (w.identity) out.push('users', 'capabilities')
  else out.push(`user-${w.uid}-only`)
  if (w.readOnlyRoot) out.push('read-only-root')
  if (w.writableLayer) out.push('writable-layer')
  if (w.hiddenPaths) out.push('hidden-paths')
  return out
}

/** What a container asks for that this node cannot build, as the message of its waiting reason; undefined when nothing. */
export function unmetWall(pod: V1Pod, container: V1Container, s: ContainerSecurity, w: NodeWalls): string | undefined {
  const field = (f: string) => `securityContext.${f}`
  const cannot = (what: string, why: string) => `${what} cannot be honoured on this node: ${why} (walls: ${wallNames(w).join(',')})`
  if (s.readOnlyRootFilesystem && !w.readOnlyRoot) return cannot(`${field('readOnlyRootFilesystem')}`, `pods run as bare host processes (--sandbox ${w.sandbox}) on the host's own root`)
  if (s.seccomp === 'Localhost') return cannot(`${field('seccompProfile')} Localhost`, 'the node loads no seccomp profiles')
  if (!w.namespaces && s.noNewPrivs) return cannot(field('allowPrivilegeEscalation: false'), `pods run as bare host processes (--sandbox ${w.sandbox}), without no_new_privs`)
  if (w.identity) return undefined
  const why = w.namespaces ? `vnode runs as uid ${w.uid}, and its user namespace maps only that user` : `pods run as bare host processes (--sandbox ${w.sandbox}) as vnode's user, uid ${w.uid}`
  if (s.uid !== w.uid) return cannot(`runAsUser ${s.uid}`, why)
  if (s.gid !== w.gid) return cannot(`runAsGroup ${s.gid}`, why)
  const foreign = s.groups.filter((g) => !w.groups.includes(g))
  if (foreign.length) return cannot(`supplementary groups ${foreign.join(',')} (fsGroup, supplementalGroups)`, why)
  // Not root: the process has no capabilities, whatever the spec dropped; privileged asks for all of them.
  if (w.uid !== 0 && s.privileged) return cannot(field('privileged'), why)
  // Root without namespaces: every process has every capability, so a drop cannot be honoured.
  if (w.uid === 0 && !w.namespaces && s.asked.capabilities && !s.privileged) return cannot(field('capabilities'), why)
  return undefined
}
