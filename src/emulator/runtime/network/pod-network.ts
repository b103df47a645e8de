import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rename, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {cniAdd, cniDel, type CniConfList, type CniInvocation, type CniResult, CniVersion, DefaultCniPath} from './cni.js'
import {bridgeName, conflist, defaultPodCidr, firstHost, isIpv4Cidr, type NodeNetworkConfig, podChain, type PortMapping} from './config.js'
import {removeHostportChainIfEmpty} from './hostport-chain.js'
import {addNetns, deleteNetns, netnsExists, netnsPath} from './netns.js'

/**
 * The pod network of one node: a network namespace and an address per
 * non-hostNetwork pod, from the CNI plugin chain of config.ts. What each
 * pod got (the CNI result) is kept in the state dir, so a vnode restart
 * adopts the pod with its namespace and address, and the DEL that removes
 * them later has the result the plugins expect.
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

  private invocation(rec: {uid: string; namespace: string; name: string}, ifName: string): CniInvocation {
    return {
      containerId: rec.uid,
      netns: netnsPath(NetnsPrefix + rec.uid),
      ifName,
      args: {K8S_POD_NAMESPACE: rec.namespace, K8S_POD_NAME: rec.name, K8S_POD_UID: rec.uid},
    }
  }

  private static loopback: CniConfList = {cniVersion: CniVersion, name: 'vnode-loopback', plugins: [{type: 'loopback'}]}

  /** The pod's namespace and address, made now or adopted from an earlier run. */
  async attach(req: PodNetworkRequest): Promise<PodAttachment> {
    const kept = await this.attached(req.uid)
    if (kept) return kept
    await this.ensureBridge()
    const netns = await addNetns(NetnsPrefix + req.uid)
    const list = podChain(this.list, req.portMappings)
    try {
      await cniAdd(PodNetwork.loopback, this.invocation(req, 'lo'), this.cniPath)
      const result = await cniAdd(list, this.invocation(req, PodInterface), this.cniPath)
      const addr = result.ips?.[0]?.address?.split('/')[0]
      if (!addr) throw new Error('the CNI result has no address')
      const rec: AttachmentRecord = {uid: req.uid, namespace: req.namespace, name: req.name, netns, ip: addr, portMappings: req.portMappings, result}
      await mkdir(join(this.dir, 'pods'), {recursive: true, mode: 0o700})
      const tmp = `${this.recordFile(req.uid)}.tmp`
      await writeFile(tmp, JSON.stringify(rec), {mode: 0o600})
      await rename(tmp, this.recordFile(req.uid))
      return {ip: addr, netns}
    } catch (error) {
      await cniDel(list, this.invocation(req, PodInterface), undefined, this.cniPath).catch(() => undefined)
      await deleteNetns(NetnsPrefix + req.uid).catch(() => undefined)
      throw error
    }
  }

  /** The attachment an earlier attach left, when its namespace still exists. */
  async attached(uid: string): Promise<PodAttachment | undefined> {
    const rec = await this.readRecord(uid)
    return rec && netnsExists(NetnsPrefix + uid) ? {ip: rec.ip, netns: rec.netns} : undefined
  }

  private async readRecord(uid: string): Promise<AttachmentRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.recordFile(uid), 'utf8')) as AttachmentRecord
    } catch {
      return undefined
    }
  }

  /** Gives the pod's address back and removes its veth, port mappings and namespace. */
  async detach(uid: string): Promise<void> {
    const rec = await this.readRecord(uid)
    if (rec) {
      await cniDel(podChain(this.list, rec.portMappings), this.invocation(rec, PodInterface), rec.result, this.cniPath).catch(() => undefined)
    }
    await deleteNetns(NetnsPrefix + uid)
    await rm(this.recordFile(uid), {force: true})
  }

  /** UIDs of the pods attached by this node (records in the state dir). */
  async attachedUids(): Promise<string[]> {
    const files = await readdir(join(this.dir, 'pods')).catch(() => [] as string[])
    return files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5))
  }

  /**
   * The node stops: once no pod is attached, the bridge and the lease
   * directory go too. Attached pods (left running for a later adoption)
   * keep everything.
   */
  async close(): Promise<void> {
    if ((await this.attachedUids()).length > 0) return
    if (existsSync(this.dir) || this.bridgeReady) {
      await ip(['link', 'del', this.config.bridge])
      await rm(this.dir, {recursive: true, force: true})
      await removeHostportChainIfEmpty()
    }
    this.bridgeReady = undefined
  }
}
