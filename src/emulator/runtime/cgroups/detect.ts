import {mkdirSync, readFileSync, rmdirSync} from 'node:fs'
import {join} from 'node:path'
import {readCg, writeCg} from './driver.js'
import {type CgroupMount, ownDir, parseMountinfo, parseProcCgroup} from './layout.js'
import {OptionalV1Controllers, RequiredV1Controllers, type V1Controller} from './v1.js'
import {enableControllers, RequiredV2Controllers} from './v2.js'

export type CgroupMode = 'v1' | 'v2' | 'none'
export type CgroupRequest = 'auto' | CgroupMode

/** What the host allows, found by trying: where vnode's own cgroups are, per hierarchy. */
export interface CgroupSupport {
  mode: CgroupMode
  /** Why there are no cgroups (mode none), or why the requested mode was not possible. */
  reason?: string
  /** v1: vnode's own cgroup directory in each controller's hierarchy. */
  v1Dirs?: Map<V1Controller, string>
  /** v2: vnode's own cgroup directory. */
  v2Dir?: string
}

export interface CgroupHost {
  mountinfo: string
  procCgroup: string
}

function readHost(): CgroupHost {
  const read = (p: string) => {
    try {
      return readFileSync(p, 'utf8')
    } catch {
      return ''
    }
  }
  return {mountinfo: read('/proc/self/mountinfo'), procCgroup: read('/proc/self/cgroup')}
}

/**
 * Which cgroups vnode can make, by making one (a probe cgroup beside where
 * the node roots go, removed at once): `auto` prefers v2 where it carries
 * the controllers (a unified host, or a delegated subtree), then v1; a
 * specific request that cannot be met is mode none with the reason.
 */
export function detectCgroups(requested: CgroupRequest = 'auto', host: CgroupHost = readHost()): CgroupSupport {
  if (requested === 'none') return {mode: 'none', reason: 'cgroups were turned off (--cgroups none)'}
  const mounts = parseMountinfo(host.mountinfo)
  const own = parseProcCgroup(host.procCgroup)
  const reasons: string[] = []
  if (requested === 'auto' || requested === 'v2') {
    const r = tryV2(mounts, own.v2)
    if (typeof r !== 'string') return r
    reasons.push(r)
  }
  if (requested === 'auto' || requested === 'v1') {
    const r = tryV1(mounts, own.v1)
    if (typeof r !== 'string') return r
    reasons.push(r)
  }
  return {mode: 'none', reason: reasons.join('; ')}
}

function tryV2(mounts: CgroupMount[], own: string | undefined): CgroupSupport | string {
  const mount = mounts.find((m) => m.version === 2)
  if (!mount || own === undefined) return 'cgroup v2: not mounted'
  const dir = ownDir(mount, own)
  if (!dir) return `cgroup v2: vnode's cgroup ${own} is not visible under ${mount.mountPoint}`
  const available = new Set((readCg(dir, 'cgroup.controllers') ?? '').trim().split(/\s+/))
  const missing = RequiredV2Controllers.filter((c) => !available.has(c))
  if (missing.length) return `cgroup v2: ${missing.join(', ')} not delegated to ${dir}`
  try {
    enableControllers(dir)
  } catch (error) {
    return `cgroup v2: cannot enable controllers in ${dir} (${(error as Error).message}); run vnode in a delegated cgroup of its own, e.g. systemd-run --user --scope -p Delegate=yes`
  }
  const err = probe([dir])
  return err ? `cgroup v2: ${err}` : {mode: 'v2', v2Dir: dir}
}

function tryV1(mounts: CgroupMount[], own: Map<string, string>): CgroupSupport | string {
  const dirs = new Map<V1Controller, string>()
  for (const c of [...RequiredV1Controllers, ...OptionalV1Controllers]) {
    const mount = mounts.find((m) => m.version === 1 && m.controllers.includes(c))
    const path = own.get(c)
    const dir = mount && path !== undefined ? ownDir(mount, path) : undefined
    if (dir) dirs.set(c, dir)
  }
  const missing = RequiredV1Controllers.filter((c) => !dirs.has(c))
  if (missing.length) return `cgroup v1: ${missing.join(', ')} not mounted`
  const err = probe([...new Set(dirs.values())])
  if (err) return `cgroup v1: ${err}`
  return {mode: 'v1', v1Dirs: dirs}
}

/** Makes and removes a cgroup in each directory; the first refusal, or undefined. */
function probe(dirs: string[]): string | undefined {
  const name = `vnode-probe-${process.pid}`
  for (const d of dirs) {
    const p = join(d, name)
    try {
      mkdirSync(p)
    } catch (error) {
      const e = error as NodeJS.ErrnoException
      if (e.code !== 'EEXIST') return `cannot create a cgroup in ${d}: ${e.code ?? e.message}`
    }
    try {
      if (readCg(p, 'cpu.shares') !== undefined) writeCg(p, 'cpu.shares', 1024)
    } catch (error) {
      rmdirSync(p)
      return (error as Error).message
    }
    rmdirSync(p)
  }
  return undefined
}
