import {expect} from '@jest/globals'
import {execa} from 'execa'
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {detectCgroups} from '../../src/emulator/runtime/cgroups/detect.js'
import {nodeRootName} from '../../src/emulator/runtime/cgroups/layout.js'
import {bridgeName} from '../../src/emulator/runtime/network/config.js'
import {listNetns, NetnsDir} from '../../src/emulator/runtime/network/netns.js'
import {kubectl, type VnodeProcess} from './helpers.js'
import {links, natRules} from './network-helpers.js'

/** What the pool tests read of a node: its pool's records, the pods' namespaces, its /metrics, and what a stopped node left. */

export interface PoolRecord {
  id: string
  netns: string
  state: string
}

/** The pool's records in the node's state dir. */
export function poolRecords(node: VnodeProcess): PoolRecord[] {
  const dir = join(node.stateDir, 'network', 'pool')
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as PoolRecord)
}

/** The namespace the pod's network record names (a pool entry's, or one named after the pod). */
export function podNetns(node: VnodeProcess, uid: string): string | undefined {
  const file = join(node.stateDir, 'network', 'pods', `${uid}.json`)
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as {netns: string}).netns : undefined
}

/** The node's /metrics through the API server's node proxy, as a scraper reads it. */
export async function poolMetrics(node: string): Promise<Record<string, number>> {
  const r = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/metrics`])
  if (r.exitCode !== 0) throw new Error(`/metrics: ${r.stderr}`)
  const out: Record<string, number> = {}
  for (const line of r.stdout.split('\n')) {
    const m = /^(vnode_sandbox_pool_\w+)(?:\{(\w+)="(\w+)"\})? (\S+)/.exec(line)
    if (m) out[m[2] ? `${m[1]}:${m[3]}` : m[1]] = Number(m[4])
  }
  return out
}

/** Mount points under /run/netns (the namespaces' bind mounts) with this name. */
export function netnsMounts(names: string[]): string[] {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
  return names.filter((n) => mounts.some((m) => m.split(' ')[4] === join(NetnsDir, n)))
}

/** Everything of a stopped node's pod network, pool and cgroups is gone: the namespaces named, their mounts, veths, bridge, leases, records, port mappings and cgroup root. */
export async function expectNothingLeft(node: VnodeProcess, nodeName: string, netnsNames: string[], veths: string[]): Promise<void> {
  const left = await listNetns('vnode-')
  expect(netnsNames.filter((n) => left.includes(n))).toEqual([])
  const ipNetns = String((await execa('ip', ['netns', 'list'], {reject: false})).stdout)
  expect(netnsNames.filter((n) => ipNetns.includes(n))).toEqual([])
  expect(netnsMounts(netnsNames)).toEqual([])
  const bridge = bridgeName(nodeName)
  expect(await links()).not.toContain(bridge)
  expect((await links()).filter((l) => veths.includes(l))).toEqual([])
  // host-local's leases, the pods' and the pool's records.
  expect(existsSync(join(node.stateDir, 'network'))).toBe(false)
  expect(await natRules()).not.toContain('CNI-HOSTPORT')
  const cg = detectCgroups('auto')
  const rootName = nodeRootName(nodeName, node.stateDir)
  const roots = cg.mode === 'v2' ? [join(cg.v2Dir!, rootName)] : cg.mode === 'v1' ? [...new Set(cg.v1Dirs!.values())].map((d) => join(d, rootName)) : []
  for (const r of roots) expect(existsSync(r)).toBe(false)
}
