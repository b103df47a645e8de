// What a benchmark run could leave behind, looked for after everything is
// stopped: processes that name the run's directory (in argv, environment or
// working directory), mounts under it, vnode's cgroup roots, bridges and pod
// network namespaces of the run's nodes, pods and warm pools. Other runs on the machine
// have other directories, node names and pod uids, so only this run's count.
import {existsSync, readdirSync, readFileSync, readlinkSync} from 'node:fs'
import {join} from 'node:path'
import {execFileSync} from 'node:child_process'
import {mountsUnder} from '../test/conformance/reference-node.mjs'
import {root} from './lib.mjs'

const CgroupMount = '/sys/fs/cgroup'
/** vnode's node roots sit under the cgroup vnode runs in: a few levels down at most. */
const CgroupSearchDepth = 6

const dist = (m) => import(join(root, 'dist', m))

function read(path) {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

function processesNaming(dir) {
  const out = []
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    if (Number(p) === process.pid) continue
    let cwd = ''
    try {
      cwd = readlinkSync(`/proc/${p}/cwd`)
    } catch {
      /* gone, or not ours to read */
    }
    const argv = read(`/proc/${p}/cmdline`)
    if (argv.includes(dir) || read(`/proc/${p}/environ`).includes(dir) || cwd.startsWith(dir)) out.push(`process ${p} (${argv.split('\0').slice(0, 3).join(' ')})`)
  }
  return out
}

function cgroupDirsNamed(names) {
  const out = []
  const walk = (path, depth) => {
    let entries
    try {
      entries = readdirSync(path, {withFileTypes: true})
    } catch {
      return
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue
      if (names.has(e.name)) out.push(`cgroup ${join(path, e.name)}`)
      else if (depth > 0) walk(join(path, e.name), depth - 1)
    }
  }
  if (existsSync(CgroupMount)) walk(CgroupMount, CgroupSearchDepth)
  return out
}

function linkExists(name) {
  try {
    execFileSync('ip', ['link', 'show', name], {stdio: 'ignore'})
    return true
  } catch {
    return false
  }
}

/**
 * Everything of this run still there: dir is the run's directory, nodes the
 * vnode nodes it started ({name, stateDir}), podUids the pods it made.
 */
export async function benchLeftovers({dir, nodes, podUids}) {
  const {nodeRootName} = await dist('emulator/runtime/cgroups/layout.js')
  const {bridgeName} = await dist('emulator/runtime/network/config.js')
  const {NetnsDir, netnsPath} = await dist('emulator/runtime/network/netns.js')
  const {NetnsPrefix} = await dist('emulator/runtime/network/pod-network.js')
  const left = [...processesNaming(dir), ...(await mountsUnder(dir)).map((m) => `mount ${m}`)]
  left.push(...cgroupDirsNamed(new Set(nodes.map((n) => nodeRootName(n.name, n.stateDir)))))
  for (const n of nodes) if (linkExists(bridgeName(n.name))) left.push(`bridge ${bridgeName(n.name)} (${n.name})`)
  if (existsSync(NetnsDir)) for (const uid of podUids) if (existsSync(netnsPath(NetnsPrefix + uid))) left.push(`netns ${netnsPath(NetnsPrefix + uid)}`)
  // A node's network state (host-local's leases, the pods' and the warm pool's records) goes with its last pod;
  // a pool entry's record goes only once its namespace is gone, so the records name every pool namespace left.
  for (const n of nodes) {
    const net = join(n.stateDir, 'network')
    if (!existsSync(net)) continue
    left.push(`network state ${net} (${n.name})`)
    const pool = join(net, 'pool')
    for (const f of existsSync(pool) ? readdirSync(pool).filter((e) => e.endsWith('.json')) : []) {
      const netns = JSON.parse(read(join(pool, f)) || '{}').netns
      if (netns && existsSync(netns)) left.push(`netns ${netns} (pool of ${n.name})`)
    }
  }
  return left
}
