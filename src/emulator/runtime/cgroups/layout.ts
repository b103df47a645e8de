import {createHash} from 'node:crypto'
import {posix} from 'node:path'
import type {QosClass} from './resources.js'

/**
 * Where each cgroup lives, relative to the node root (the kubelet's cgroupfs
 * layout, with the node root in place of /kubepods):
 *
 *   <vnode's own cgroup>/vnode-<node>-<hash of the state dir>   the node root (one per node and state dir)
 *     pod<uid>/                                           Guaranteed pods
 *     burstable/pod<uid>/                                 Burstable pods
 *     besteffort/pod<uid>/                                BestEffort pods
 *       <container id>/                                   one per container instance
 *
 * The node root sits under the cgroup vnode itself runs in, so whatever
 * bounds vnode (a session's memory cgroup, a systemd delegation) bounds its
 * pods too; the state dir's hash lets several nodes and runs with the same
 * node name coexist, while a restart with the same state dir finds its tree.
 */

export const QosDirs: Record<QosClass, string> = {Guaranteed: '', Burstable: 'burstable', BestEffort: 'besteffort'}

export function nodeRootName(nodeName: string, stateDir: string): string {
  const hash = createHash('sha256').update(posix.resolve(stateDir)).digest('hex').slice(0, 8)
  return `vnode-${nodeName}-${hash}`
}

export function podCgroupName(uid: string): string {
  return `pod${uid}`
}

export function podCgroupPath(qos: QosClass, uid: string): string {
  return posix.join(QosDirs[qos], podCgroupName(uid))
}

/** The container ID without its `vnode://` scheme. */
export function containerCgroupName(containerID: string): string {
  const id = containerID.replace(/^[a-z]+:\/\//, '')
  if (!/^[A-Za-z0-9._-]+$/.test(id) || id === '.' || id === '..') throw new Error(`invalid container id "${containerID}"`)
  return id
}

export function containerCgroupPath(podPath: string, containerID: string): string {
  return posix.join(podPath, containerCgroupName(containerID))
}

/** The pod UID a path under the node root belongs to (pod<uid> at depth 1 or 2). */
export function podUidOf(path: string): string | undefined {
  for (const part of path.split('/').slice(0, 2)) if (part.startsWith('pod')) return part.slice(3)
  return undefined
}

/**
 * Own cgroup path of a hierarchy from /proc/self/cgroup text: `hierarchy-id:controllers:path`
 * lines; v2 is the line with empty controllers ("0::/path").
 */
export function parseProcCgroup(text: string): {v1: Map<string, string>; v2?: string} {
  const v1 = new Map<string, string>()
  let v2: string | undefined
  for (const line of text.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim())
    if (!m) continue
    if (m[2] === '' && m[1] === '0') v2 = m[3]
    else for (const c of m[2].split(',')) v1.set(c, m[3])
  }
  return {v1, v2}
}

export interface CgroupMount {
  /** Where it is mounted. */
  mountPoint: string
  /** The cgroup path the mount shows as its root (not `/` inside a cgroup namespace or a bind mount). */
  root: string
  version: 1 | 2
  /** v1: the controllers of this hierarchy (name=systemd included). */
  controllers: string[]
}

/** cgroup mounts from /proc/self/mountinfo text. */
export function parseMountinfo(text: string): CgroupMount[] {
  const out: CgroupMount[] = []
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ')
    if (sep < 0) continue
    const left = line.slice(0, sep).split(' ')
    const [fstype, , superOpts = ''] = line.slice(sep + 3).split(' ')
    const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)))
    if (fstype === 'cgroup2') out.push({mountPoint: unescape(left[4]), root: unescape(left[3]), version: 2, controllers: []})
    else if (fstype === 'cgroup') {
      const controllers = superOpts
        .split(',')
        .filter((o) => !['rw', 'ro', 'relatime', 'noexec', 'nosuid', 'nodev', 'clone_children', 'noprefix', 'xattr'].includes(o) && !o.startsWith('release_agent='))
      out.push({mountPoint: unescape(left[4]), root: unescape(left[3]), version: 1, controllers})
    }
  }
  return out
}

/** The directory of the cgroup `own` (a path from /proc/self/cgroup) in a mount, or undefined when the mount does not show it. */
export function ownDir(mount: CgroupMount, own: string): string | undefined {
  const rel = posix.relative(mount.root, own)
  if (rel.startsWith('..')) return undefined
  return posix.join(mount.mountPoint, rel)
}
