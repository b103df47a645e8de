import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rename, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {RealClock, type Clock} from '../../../common/clock.js'
import {RefillHolds} from '../../../common/refill-holds.js'
import type {SandboxPoolFigures} from '../../provider/pool.js'
import {cniAdd, type CniConfList, type CniDelSteps, type CniInvocation, type CniResult, DefaultCniPath} from './cni.js'
import {bridgeName, conflist, defaultPodCidr, firstHost, isIpv4Cidr, type NodeNetworkConfig, podChain, podIndependentChain, podSpecificChain, type PortMapping} from './config.js'
import {removeHostportChainIfEmpty} from './hostport-chain.js'
import {deleteNetns} from './netns.js'

/** Where the pods' and the pool's network namespaces are held (sandbox/mount-base.ts keeps them out of every sandbox). */
export {NetnsDir} from './netns.js'
import {helpers} from '../process/helper-runner.js'
import {destroyEntry, type EntryContext, forgetEntry, makeEntry, makeNetwork, markLeasing, type NetworkEntry, reclaimEntries, removeNetwork, removeNetworkSteps} from './pool-entries.js'
import {DefaultPoolCap, poolCapFor, PoolSizing, type PoolSizingOptions} from './pool-sizing.js'
import {SandboxPool} from './sandbox-pool.js'

/**
 * The pod network of one node: a network namespace and an address per
 * non-hostNetwork pod, from the CNI plugin chain of config.ts. What each
 * pod got (the CNI result) is kept in the state dir, so a vnode restart
 * adopts the pod with its namespace and address, and the DEL that removes
 * them later has the result the plugins expect.
 *
 * A pod's network comes from the warm pool when it has an entry ready
 * (sandbox-pool.ts, pool-entries.ts): the namespace, veth and address were
 * made ahead; only the pod's port mappings are added at lease time. When
 * the pool is empty the pod makes its own, as it would without a pool.
 */

export const NetnsPrefix = 'vnode-'
export const PodInterface = 'eth0'

export interface PodNetworkRequest {
  uid: string
  namespace: string
  name: string
  portMappings: PortMapping[]
}

export interface PodAttachment {
  ip: string
  netns: string
}

interface AttachmentRecord {
  uid: string
  namespace: string
  name: string
  /** The CNI containerID the address was leased with: a pool entry's id, or the pod's uid (absent in older records: the uid). */
  containerId?: string
  netns: string
  ip: string
  portMappings: PortMapping[]
  result: CniResult
}

export interface PodNetworkOptions {
  nodeName: string
  /** The Node's spec.podCIDR; a per-node default when absent. */
  podCidr?: string
  stateDir: string
  /** Destinations the pods reach through the host: service ranges, the host's addresses. */
  routes: string[]
  cniPath?: string
  /** The warm pool's sizing; cap 0: no pool. */
  pool?: PoolSizingOptions
  clock?: Clock
  log?: (line: string) => void
}

/** How long a stopping node waits for the veths of the namespaces it deleted to go (the kernel's cleanup of them). */
export const DefaultVethsGoneWaitMs = 5_000
const VethsGonePollMs = 20

/**
 * Until the bridge has no port left, or the wait is over: each veth the
 * node made is a port of its bridge until the kernel's cleanup of its
 * namespace removes it (cni.ts cniDel), so a node whose stop
 * returns leaves none of them behind.
 */
async function bridgePortsGone(bridge: string, waitMs = DefaultVethsGoneWaitMs): Promise<void> {
  const deadline = Date.now() + waitMs
  const ports = () => readdir(join('/sys/class/net', bridge, 'brif')).catch(() => [] as string[])
  while ((await ports()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, VethsGonePollMs))
}

async function ip(args: string[]): Promise<{ok: boolean; stderr: string}> {
  const r = await execa('ip', args, {reject: false, stdin: 'ignore'})
  return {ok: r.exitCode === 0, stderr: String(r.stderr).trim()}
}

export class PodNetwork {
  readonly config: NodeNetworkConfig
  private readonly list: CniConfList
  private readonly dir: string
  private readonly cniPath: string
  private bridgeReady: Promise<void> | undefined
  private readonly entries: EntryContext
  private readonly pool: SandboxPool<NetworkEntry> | undefined
  /**
   * The pod starts and stops under way, which the warm pool's refill waits
   * for: the node's one such signal (the provider holds it around each
   * start and stop, and its other background work listens to it too).
   */
  readonly refillHolds: RefillHolds
  /** Detached pods whose address is being given back, by UID (detach). */
  private readonly returning = new Map<string, Promise<void>>()
  private readonly log: ((line: string) => void) | undefined

  constructor(opts: PodNetworkOptions) {
    const podCidr = isIpv4Cidr(opts.podCidr) ? opts.podCidr : defaultPodCidr(opts.nodeName)
    this.dir = join(opts.stateDir, 'network')
    this.cniPath = opts.cniPath ?? DefaultCniPath
    this.config = {
      nodeName: opts.nodeName,
      podCidr,
      gateway: firstHost(podCidr),
      bridge: bridgeName(opts.nodeName),
      ipamDir: join(this.dir, 'ipam'),
      routes: opts.routes,
    }
    this.list = conflist(this.config)
    this.entries = {
      dir: join(this.dir, 'pool'),
      cniPath: this.cniPath,
      chain: podIndependentChain(this.list),
      fullChain: this.list,
      ifName: PodInterface,
      ensureBridge: () => this.ensureBridge(),
    }
    // A cap given is the user's; the default one leaves the node's pods their addresses.
    const sizing = new PoolSizing({...opts.pool, cap: opts.pool?.cap ?? poolCapFor(DefaultPoolCap, podCidr, opts.pool?.maxPods)})
    const clock = opts.clock ?? RealClock
    this.refillHolds = new RefillHolds(() => clock.now())
    this.log = opts.log
    if (sizing.cap > 0) {
      this.pool = new SandboxPool({make: () => makeEntry(this.entries), destroy: (e) => destroyEntry(this.entries, e)}, sizing, clock, this.refillHolds, opts.log)
    }
  }

  private recordFile(uid: string): string {
    return join(this.dir, 'pods', `${uid}.json`)
  }

  /** The bridge with the gateway address, made once; forwarding on for packets that arrive on it only. */
  private ensureBridge(): Promise<void> {
    this.bridgeReady ??= (async () => {
      const br = this.config.bridge
      if (!(await ip(['link', 'show', 'dev', br])).ok) {
        const r = await ip(['link', 'add', br, 'type', 'bridge'])
        if (!r.ok) throw new Error(`ip link add ${br} type bridge: ${r.stderr}`)
      }
      const prefix = this.config.podCidr.split('/')[1]
      const addr = await ip(['addr', 'replace', `${this.config.gateway}/${prefix}`, 'dev', br])
      if (!addr.ok) throw new Error(`ip addr replace ${this.config.gateway}/${prefix} dev ${br}: ${addr.stderr}`)
      await ip(['link', 'set', br, 'up'])
      // Per device, not the host's ip_forward: a pod's connection to a Service IP that kube-proxy
      // sends to another pod of this bridge is forwarded; nothing that arrives elsewhere is. Pods
      // have no default route, so nothing they send is forwarded off the machine.
      await writeFile(`/proc/sys/net/ipv4/conf/${br}/forwarding`, '1').catch(() => undefined)
    })().catch((error) => {
      this.bridgeReady = undefined
      throw error
    })
    return this.bridgeReady
  }

  private invocation(rec: {uid: string; namespace: string; name: string; containerId?: string; netns: string}, ifName: string): CniInvocation {
    return {
      containerId: rec.containerId ?? rec.uid,
      netns: rec.netns,
      ifName,
      args: {K8S_POD_NAMESPACE: rec.namespace, K8S_POD_NAME: rec.name, K8S_POD_UID: rec.uid},
    }
  }

  /**
   * Once at start, after the pods' adoption (`adopted`: their UIDs), in one
   * pass over the attachment records: those of pods no runtime took over (a
   * node stopped, or killed, while their addresses were being given back;
   * an unreadable pod record) are removed and their addresses given back
   * (what cannot be removed is logged and keeps its record); the pool
   * entries a previous run recorded are reclaimed (ready, namespace still
   * there) or destroyed, those leased to adopted pods are left to the pods'
   * records; then the pool fills.
   */
  async start(adopted: ReadonlySet<string>): Promise<void> {
    const leased = new Set<string>()
    for (const uid of await this.attachedUids()) {
      if (!adopted.has(uid)) {
        await this.detach(uid).catch((error: unknown) => this.log?.(`cannot remove the network of gone pod ${uid}: ${(error as Error).message}`))
        continue
      }
      const rec = await this.readRecord(uid)
      if (rec?.containerId) leased.add(rec.containerId)
    }
    await this.addressesReturned()
    if (this.pool) await this.pool.start(await reclaimEntries(this.entries, leased))
  }

  /** The pool's figures; undefined without a pool. */
  poolFigures(): SandboxPoolFigures | undefined {
    return this.pool?.figures()
  }

  /** The pod's namespace and address, made now or adopted from an earlier run. */
  async attach(req: PodNetworkRequest): Promise<PodAttachment> {
    // A detach of the same UID may still be giving its address back: its record is not this attach's to find.
    await this.returning.get(req.uid)
    const kept = await this.attached(req.uid)
    if (kept) return kept
    // An entry whose namespace was removed behind vnode's back is no sandbox: destroyed, the next one taken.
    const leased = this.pool?.lease((e) => existsSync(e.netns))
    // The pool was empty: the pod makes its own, named after it (no pool record: the pod's follows at once).
    const entry = leased ?? (await makeNetwork(this.entries, req.uid, NetnsPrefix + req.uid))
    const rec: AttachmentRecord = {
      uid: req.uid,
      namespace: req.namespace,
      name: req.name,
      containerId: entry.id,
      netns: entry.netns,
      ip: entry.ip,
      portMappings: req.portMappings,
      result: entry.result,
    }
    try {
      const specific = podSpecificChain(this.list, req.portMappings)
      if (leased && specific.plugins.length > 0) await markLeasing(this.entries, leased)
      if (specific.plugins.length > 0) rec.result = await cniAdd(specific, this.invocation(rec, PodInterface), this.cniPath, entry.result)
      await mkdir(join(this.dir, 'pods'), {recursive: true, mode: 0o700})
      const tmp = `${this.recordFile(req.uid)}.tmp`
      await writeFile(tmp, JSON.stringify(rec), {mode: 0o600})
      await rename(tmp, this.recordFile(req.uid))
    } catch (error) {
      // The entry is not given back: what a failed step left in it is unknown. The pool makes a new one.
      await removeNetwork(this.cniPath, podChain(this.list, req.portMappings), this.invocation(rec, PodInterface), rec.result).catch(() => undefined)
      await rm(this.recordFile(req.uid), {force: true})
      if (leased) await forgetEntry(this.entries, leased.id)
      throw error
    }
    // Named by the pod's record now: a restart finds it there.
    if (leased) await forgetEntry(this.entries, leased.id)
    return {ip: entry.ip, netns: entry.netns}
  }

  /** The attachment an earlier attach left, when its namespace still exists. */
  async attached(uid: string): Promise<PodAttachment | undefined> {
    const rec = await this.readRecord(uid)
    return rec && existsSync(rec.netns) ? {ip: rec.ip, netns: rec.netns} : undefined
  }

  private async readRecord(uid: string): Promise<AttachmentRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.recordFile(uid), 'utf8')) as AttachmentRecord
    } catch {
      return undefined
    }
  }

  /**
   * Removes the pod's port mappings, namespace and veth, and returns once
   * they are gone; its address is given back after that, in the
   * background (addressesReturned), and its record goes once it is back.
   * The plugins' failures are not the pod's (its record goes), a
   * namespace left behind is (its record stays).
   *
   * Why the address may follow the pod's end: nothing of the pod is on the
   * network once its namespace is deleted, and the IPAM plugin's DEL takes
   * a lock on the node's leases, so a burst of deletions ran them one at a
   * time before each pod could report its end (0.4 s at the median of 100).
   * Until it is back the address is not leased again (host-local's lease
   * and the pod's record stay): a restart finds the record and gives it
   * back, an attach of the same UID waits for it, and close() waits for all.
   */
  async detach(uid: string): Promise<void> {
    await this.returning.get(uid)
    const rec = await this.readRecord(uid)
    if (!rec) {
      await deleteNetns(NetnsPrefix + uid)
      await rm(this.recordFile(uid), {force: true})
      return
    }
    const del = removeNetworkSteps(this.cniPath, podChain(this.list, rec.portMappings), this.invocation(rec, PodInterface), rec.result)
    const returned = this.returnAddress(uid, del)
    try {
      await del.interfacesGone
    } catch (error) {
      await returned
      throw error
    }
  }

  /** The address's DEL, held by the node's background work and counted until it is back; the record goes when the namespace went too. */
  private returnAddress(uid: string, del: CniDelSteps): Promise<void> {
    const ended = this.refillHolds.add()
    const returned = Promise.allSettled([del.interfacesGone, del.addressReturned])
      .then(async ([interfaces]) => {
        if (interfaces.status === 'fulfilled') await rm(this.recordFile(uid), {force: true})
      })
      .catch(() => undefined)
      .finally(() => {
        ended()
        this.returning.delete(uid)
      })
    this.returning.set(uid, returned)
    return returned
  }

  /** Addresses of pods gone being given back now (detach). */
  get addressesReturning(): number {
    return this.returning.size
  }

  /** Once every address being given back (detach) is back. */
  async addressesReturned(): Promise<void> {
    while (this.returning.size > 0) await Promise.all(this.returning.values())
  }

  /** UIDs of the pods attached by this node (records in the state dir). */
  async attachedUids(): Promise<string[]> {
    const files = await readdir(join(this.dir, 'pods')).catch(() => [] as string[])
    return files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5))
  }

  /**
   * The node stops: the pool's entries are destroyed; once no pod is
   * attached, the bridge and the lease directory go too. Attached pods
   * (left running for a later adoption) keep everything.
   */
  async close(): Promise<void> {
    await this.pool?.close()
    await this.addressesReturned()
    // The last plugin runs are over: the helper that ran them goes now rather than once idle.
    helpers.close()
    if ((await this.attachedUids()).length > 0) return
    if (existsSync(this.dir) || this.bridgeReady) {
      await bridgePortsGone(this.config.bridge)
      await ip(['link', 'del', this.config.bridge])
      await rm(this.dir, {recursive: true, force: true})
      await removeHostportChainIfEmpty()
    }
    this.bridgeReady = undefined
  }
}
