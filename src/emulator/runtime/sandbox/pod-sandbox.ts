import {EventReason} from '../../kube/event-reasons.js'
import type {V1Pod} from '@kubernetes/client-node'
import {mkdir, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import type {Clock} from '../../../common/clock.js'
import {Backoff} from '../../kube/backoff.js'
import type {ProviderContext} from '../../provider/handler.js'
import {PodCgroupState} from '../cgroups/pod-cgroup.js'
import type {NodeCgroups} from '../cgroups/node-cgroups.js'
import {podRef} from '../../../common/pods.js'
import type {NodeFacts} from '../env/env.js'
import {PodNetworkAttachment} from '../network/pod-attachment.js'
import type {PodNetwork} from '../network/pod-network.js'
import type {TokenSource} from '../volumes/tokens.js'
import {VolumeRefresher, type VolumeRefreshOptions} from '../volumes/refresh.js'
import {removeTree} from '../../../common/remove-tree.js'
import {materialiseVolumes, removeRealLinks, volumesDir, type MaterialisedVolume, type RealLink} from '../volumes/volumes.js'
import {containerHostname, hostsFile, resolvConf, type PodDNS} from './pod-files.js'
import {holderAlive, startPidNamespaceHolder, stopPidNamespaceHolder, type PidNamespaceHolder} from './pod-pid-namespace.js'
import {retiredLayersRemoved} from './root-layer.js'

/** How many earlier instances' layers are still being removed (root-layer.ts). */
export {retiringLayers} from './root-layer.js'
import type {SandboxMode} from './spec.js'

export interface PodSandboxDeps {
  /** The pod's sandbox directory (<stateDir>/pods/<uid>). */
  dir: string
  ctx: ProviderContext
  node: NodeFacts
  /** The pod's projected service account tokens (shared by the node's pods). */
  tokens: TokenSource
  volumeRefresh?: VolumeRefreshOptions
  /** Retrying volumes that did not mount (the volume manager's backoff). */
  mountRetry: {initialMs: number; maxMs: number}
  /** The node's cgroup tree; undefined where none can be made (the plain mode). */
  cgroups?: NodeCgroups
  /** Node allocatable, for a resize's feasibility. */
  allocatable?: {cpuCores: number; memoryBytes: number}
  /** The node's pod network; undefined: the pod runs on the host network. */
  network?: PodNetwork
  sandboxMode: SandboxMode
  dns: PodDNS
  clock: Clock
  /** The pod as it is now (its spec and metadata change with updates). */
  pod(): V1Pod
  /** What the pod's record holds of the sandbox changed (the PID namespace holder). */
  changed(): void
}

/** What ensure() got to: ready, or why not and when to try again. */
export type SandboxSetUp =
  | {ready: true; mounted: boolean}
  /** A volume did not mount (FailedMount): retry at retryAt, on the mount back-off. */
  | {ready: false; retryAt: number}
  /** The network could not be set up (FailedCreatePodSandBox): the sync failed. */
  | {ready: false; syncFailed: true}

/** The pod's /etc/hosts, /etc/resolv.conf and /etc/hostname, in its sandbox dir. */
export interface PodFiles {
  hosts: string
  resolvConf: string
  hostname: string
}

/**
 * One pod's sandbox, the kubelet's RunPodSandbox and its teardown: the
 * volumes (with their refresh and the real mountPath links), the network
 * namespace and address, the shared PID namespace's holder, the pod's files
 * and the pod cgroup. It is the one place that creates and releases them.
 */
export class PodSandbox {
  /** Mounted volumes; undefined until every one mounted. */
  volumes: Map<string, MaterialisedVolume> | undefined
  /** Plain mode: the real symlinks made at mountPaths (removed with the pod). */
  links: RealLink[] = []
  /** Mounts that failed so far: the sandbox waits for them. */
  mountFailures = 0
  readonly refresh: VolumeRefresher
  /** The pod's cgroup, its containers' cgroups, resize state (cgroups/pod-cgroup.ts). */
  readonly cgroup: PodCgroupState
  /** The pod's network namespace and address, when the node has a pod network. */
  readonly net: PodNetworkAttachment
  /** shareProcessNamespace in a sandbox: the PID 1 every container joins. */
  pidHolder: PidNamespaceHolder | undefined
  private readonly mountRetry: Backoff

  constructor(private readonly deps: PodSandboxDeps) {
    this.mountRetry = new Backoff(deps.mountRetry.initialMs, deps.mountRetry.maxMs)
    this.refresh = new VolumeRefresher(
      {
        pod: deps.pod,
        sandbox: deps.dir,
        volumes: this.volumeDeps(),
        objects: deps.ctx.objects,
        failed: (message) => void deps.ctx.recorder.record(podRef(deps.pod()), 'Warning', EventReason.FailedMountVolume, message),
        clock: deps.clock,
      },
      deps.volumeRefresh,
    )
    this.cgroup = new PodCgroupState(deps.cgroups, deps.allocatable)
    this.net = new PodNetworkAttachment(deps.network, deps.pod)
  }

  get dir(): string {
    return this.deps.dir
  }

  /** The volumes are mounted and the network (when the node has one) is attached. */
  get ready(): boolean {
    return this.volumes !== undefined && (!this.net.enabled || this.net.attachment !== undefined)
  }

  volumeDeps() {
    return {node: this.deps.node, objects: this.deps.ctx.objects, tokens: this.deps.tokens, core: this.deps.ctx.core, sandboxed: this.deps.sandboxMode === 'namespaces'}
  }

  /** The sandbox directory (made on libuv's threads, off the event loop a burst's syncs share); the record and the volumes' refresh follow the pod. */
  async open(pod: V1Pod): Promise<void> {
    this.refresh.track(pod)
    await mkdir(this.deps.dir, {recursive: true, mode: 0o700})
  }

  /**
   * Mounts the volumes (once), then sets up the network namespace and
   * address (once), before any container starts; the pod's files are
   * written with each, /etc/hosts naming the pod's own address.
   */
  async ensure(): Promise<SandboxSetUp> {
    const pod = this.deps.pod()
    let mounted = false
    if (!this.volumes) {
      const r = await materialiseVolumes(pod, this.deps.dir, this.volumeDeps())
      if (!r.ok) {
        void this.deps.ctx.recorder.record(podRef(pod), 'Warning', EventReason.FailedMountVolume, r.message)
        this.mountFailures++
        return {ready: false, retryAt: this.deps.clock.now() + this.mountRetry.next()}
      }
      this.volumes = r.volumes
      this.refresh.enable()
      // A network still to attach writes them once it is (/etc/hosts names the pod's own address): once per pod.
      if (!this.net.enabled || this.net.attachment) await this.writePodFiles()
      this.mountRetry.reset()
      mounted = true
    }
    if (this.net.enabled && !this.net.attachment) {
      try {
        await this.net.ensure()
        await this.writePodFiles()
      } catch (error) {
        void this.deps.ctx.recorder.record(podRef(this.deps.pod()), 'Warning', EventReason.FailedCreatePodSandBox, `Failed to create pod sandbox: ${(error as Error).message}`)
        return {ready: false, syncFailed: true}
      }
    }
    return {ready: true, mounted}
  }

  /** Real mountPath links a container's config made (plain mode). */
  addLinks(links: readonly RealLink[]): void {
    for (const l of links) if (!this.links.some((x) => x.path === l.path)) this.links.push(l)
  }

  /** Where the pod's files are (bound at /etc in each container). */
  podFiles(): PodFiles {
    const dir = join(this.deps.dir, 'etc')
    return {hosts: join(dir, 'hosts'), resolvConf: join(dir, 'resolv.conf'), hostname: join(dir, 'hostname')}
  }

  /** Written once the volumes are set up, before any container starts (the kubelet writes them with the sandbox); on libuv's threads. */
  private async writePodFiles(): Promise<void> {
    if (this.deps.sandboxMode !== 'namespaces') return
    const pod = this.deps.pod()
    const files = this.podFiles()
    await mkdir(dirname(files.hosts), {recursive: true, mode: 0o700})
    await Promise.all([
      writeFile(files.hosts, hostsFile(pod, [this.net.attachment?.ip ?? this.deps.node.nodeIP]), {mode: 0o644}),
      writeFile(files.resolvConf, resolvConf(pod, this.deps.dns), {mode: 0o644}),
      writeFile(files.hostname, `${containerHostname(pod)}\n`, {mode: 0o644}),
    ])
  }

  /** The pod's shared PID namespace, started with its first container (the kubelet's pause container). */
  async sharedPidNamespace(): Promise<PidNamespaceHolder> {
    if (holderAlive(this.pidHolder)) return this.pidHolder!
    const pod = this.deps.pod()
    const h = await startPidNamespaceHolder(containerHostname(pod))
    h.monitor.unref()
    // The pod's own process (the kubelet's pause container) lives in the pod cgroup.
    await this.cgroup.placeInPod(pod, h.pid)
    this.pidHolder = {pid: h.pid, startTicks: h.startTicks}
    this.deps.changed()
    return this.pidHolder
  }

  /** After a vnode restart (adoption.ts): the links and the PID holder the record names, if it still lives. */
  restore(links: RealLink[], pidHolder?: PidNamespaceHolder): void {
    if (holderAlive(pidHolder)) this.pidHolder = pidHolder
    this.links = [...links]
  }

  /**
   * No process of the pod is left: the pod cgroup, the PID holder, the
   * volumes (Secret content above all) and the real mountPath links go now,
   * as the kubelet's SyncTerminatedPod unmounts before the pod's final status
   * and deletion; then the network. Logs and the record stay until remove().
   */
  async release(): Promise<void> {
    await this.cgroup.removePod(this.deps.pod())
    stopPidNamespaceHolder(this.pidHolder)
    this.pidHolder = undefined
    await this.refresh.release()
    await removeRealLinks(this.links)
    this.links = []
    await removeTree(volumesDir(this.deps.dir))
    await this.net.release().catch(() => undefined)
  }

  /** Forgets the sandbox: its links and its directory. */
  async remove(): Promise<void> {
    await removeRealLinks(this.links)
    // An earlier instance's layer may still be going in the background, inside this directory.
    await retiredLayersRemoved()
    await removeTree(this.deps.dir)
  }
}
