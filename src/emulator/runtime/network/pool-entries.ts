import {randomBytes} from 'node:crypto'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rename, rm, writeFile} from 'node:fs/promises'
import {basename, join} from 'node:path'
import {cniAdd, cniDel, type CniDelSteps, type CniConfList, type CniInvocation, type CniResult, CniVersion} from './cni.js'
import {addNetns, deleteNetns, netnsPath} from './netns.js'

/**
 * A network sandbox made before any pod asks for it (the warm pool's entry,
 * sandbox-pool.ts): a named network namespace with loopback up and the
 * pod-independent chain run in it (the bridge's veth, host-local's
 * address). The entry's CNI containerID is its own id, not a pod's: the
 * lease host-local wrote is keyed by it, so the pod that leases the entry
 * keeps it in its record (pod-network.ts) and its DEL gives that lease
 * back. Each entry is recorded in <stateDir>/network/pool/<id>.json before
 * anything of it is made, so a vnode killed at any point leaves a record
 * the next start reclaims or destroys (reclaimEntries).
 */

export const PoolNetnsPrefix = 'vnode-pool-'

export interface NetworkEntry {
  /** The CNI containerID, and the namespace's name after PoolNetnsPrefix. */
  id: string
  netns: string
  ip: string
  /** The pod-independent chain's result: portmap's prevResult at lease time, the DEL's later. */
  result: CniResult
}

interface EntryRecord {
  id: string
  netns: string
  /**
   * making: anything of it may or may not exist; ready: the result is whole;
   * leasing: a pod is adding its port mappings (portmap may have made chains
   * named by the entry's id).
   */
  state: 'making' | 'ready' | 'leasing'
  ip?: string
  result?: CniResult
}

export interface EntryContext {
  /** <stateDir>/network/pool */
  dir: string
  cniPath: string
  /** The node's pod-independent chain (config.ts podIndependentChain). */
  chain: CniConfList
  /** The whole chain: portmap's DEL removes what it made by containerID, without the mappings. */
  fullChain: CniConfList
  ifName: string
  ensureBridge(): Promise<void>
}

const loopback: CniConfList = {cniVersion: CniVersion, name: 'vnode-loopback', plugins: [{type: 'loopback'}]}

function invocation(id: string, netns: string, ifName: string): CniInvocation {
  return {containerId: id, netns, ifName}
}

function recordFile(ctx: EntryContext, id: string): string {
  return join(ctx.dir, `${id}.json`)
}

async function writeRecord(ctx: EntryContext, rec: EntryRecord): Promise<void> {
  await mkdir(ctx.dir, {recursive: true, mode: 0o700})
  const file = recordFile(ctx, rec.id)
  await writeFile(`${file}.tmp`, JSON.stringify(rec), {mode: 0o600})
  await rename(`${file}.tmp`, file)
}

/** The namespace, loopback and the pod-independent chain; undone (and thrown) when a step fails. */
export async function makeNetwork(ctx: Omit<EntryContext, 'dir'>, id: string, netnsName: string): Promise<NetworkEntry> {
  await ctx.ensureBridge()
  const netns = await addNetns(netnsName)
  try {
    await cniAdd(loopback, invocation(id, netns, 'lo'), ctx.cniPath)
    const result = await cniAdd(ctx.chain, invocation(id, netns, ctx.ifName), ctx.cniPath)
    const ip = result.ips?.[0]?.address?.split('/')[0]
    if (!ip) throw new Error('the CNI result has no address')
    return {id, netns, ip, result}
  } catch (error) {
    await removeNetwork(ctx.cniPath, ctx.chain, invocation(id, netns, ctx.ifName), undefined).catch(() => undefined)
    throw error
  }
}

/**
 * Undoes makeNetwork (and the port mappings a pod added to it): the
 * chain's DEL with the namespace deleted in it (cni.ts cniDel). What the
 * plugins fail to remove is not thrown, as nothing more can be done with
 * it; a namespace left behind is, and keeps its caller's record.
 */
export async function removeNetwork(cniPath: string, chain: CniConfList, inv: CniInvocation, result: CniResult | undefined): Promise<void> {
  const del = removeNetworkSteps(cniPath, chain, inv, result)
  const [interfaces] = await Promise.allSettled([del.interfacesGone, del.addressReturned])
  if (interfaces.status === 'rejected') throw interfaces.reason
}

/**
 * removeNetwork in its two parts (cni.ts cniDel): interfacesGone
 * rejects only when the namespace is left behind; addressReturned never
 * rejects (a plugin's failure to give the address back is not the pod's).
 */
export function removeNetworkSteps(cniPath: string, chain: CniConfList, inv: CniInvocation, result: CniResult | undefined): CniDelSteps {
  let kept: unknown
  const removeNamespace = () => deleteNetns(basename(inv.netns)).catch((error: unknown) => void (kept = error))
  const del = cniDel(chain, inv, result, removeNamespace, cniPath)
  return {
    interfacesGone: del.interfacesGone
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        if (kept) throw kept
      }),
    addressReturned: del.addressReturned.catch(() => undefined),
  }
}

/** A new pool entry, recorded before it is made and marked ready once whole. */
export async function makeEntry(ctx: EntryContext): Promise<NetworkEntry> {
  const id = `pool-${randomBytes(6).toString('hex')}`
  const name = PoolNetnsPrefix + id.slice('pool-'.length)
  await writeRecord(ctx, {id, netns: netnsPath(name), state: 'making'})
  try {
    const e = await makeNetwork(ctx, id, name)
    await writeRecord(ctx, {id, netns: e.netns, state: 'ready', ip: e.ip, result: e.result})
    return e
  } catch (error) {
    await rm(recordFile(ctx, id), {force: true})
    throw error
  }
}

/** The entry's address back, its veth and namespace removed (and port mappings a lease began), then its record; a namespace left behind keeps the record. */
export async function destroyEntry(ctx: EntryContext, e: {id: string; netns: string; result?: CniResult; state?: EntryRecord['state']}): Promise<void> {
  await removeNetwork(ctx.cniPath, e.state === 'leasing' ? ctx.fullChain : ctx.chain, invocation(e.id, e.netns, ctx.ifName), e.result)
  await forgetEntry(ctx, e.id)
}

/** A pod adds its port mappings to the entry: a restart that finds it so destroys it with them. */
export async function markLeasing(ctx: EntryContext, e: NetworkEntry): Promise<void> {
  await writeRecord(ctx, {id: e.id, netns: e.netns, state: 'leasing', ip: e.ip, result: e.result})
}

/** The entry is a pod's now (its own record names it): the pool's record goes. */
export async function forgetEntry(ctx: EntryContext, id: string): Promise<void> {
  await rm(recordFile(ctx, id), {force: true})
}

/**
 * After a restart, every entry a previous run recorded: one that a pod's
 * record names was leased (the pool's record only goes); one whole and with
 * its namespace still there is ready again; every other (half made, its
 * namespace gone) is destroyed.
 */
export async function reclaimEntries(ctx: EntryContext, leasedIds: ReadonlySet<string>): Promise<NetworkEntry[]> {
  const files = await readdir(ctx.dir).catch(() => [] as string[])
  const out: NetworkEntry[] = []
  for (const f of files) {
    if (f.endsWith('.tmp')) {
      await rm(join(ctx.dir, f), {force: true})
      continue
    }
    if (!f.endsWith('.json')) continue
    let rec: EntryRecord
    try {
      rec = JSON.parse(await readFile(join(ctx.dir, f), 'utf8')) as EntryRecord
    } catch {
      await rm(join(ctx.dir, f), {force: true})
      continue
    }
    if (leasedIds.has(rec.id)) await forgetEntry(ctx, rec.id)
    else if (rec.state === 'ready' && rec.ip && rec.result && existsSync(rec.netns)) out.push({id: rec.id, netns: rec.netns, ip: rec.ip, result: rec.result})
    else await destroyEntry(ctx, rec)
  }
  return out
}
