import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import type {CgroupSupport} from './detect.js'
import type {CgroupDriver, CgroupUsage} from './driver.js'
import {containerCgroupPath, nodeRootName, podCgroupPath, podUidOf, QosDirs} from './layout.js'
import {burstableShares, containerResources, MinShares, milliCpuToShares, NoLimit, podQos, podResources} from './resources.js'
import {CgroupV1} from './v1.js'
import {CgroupV2} from './v2.js'

/** How long killing a cgroup's processes may take before its removal is given up. */
export const DefaultCgroupKillWaitMs = 5_000
export const DefaultCgroupKillPollMs = 20

export interface NodeCgroupsOptions {
  nodeName: string
  stateDir: string
  /** Node allocatable: the node root's cpu shares and memory limit. */
  cpuCores: number
  memoryBytes: number
  /** The kubelet's podPidsLimit: each pod cgroup's pids.max (-1: none). */
  podPidsLimit?: number
}

/**
 * One node's cgroup tree (layout.ts): the node root with its QoS cgroups,
 * a cgroup per pod, one per container instance. Whatever the tree holds is
 * killed and removed when the node stops.
 */
export class NodeCgroups {
  readonly driver: CgroupDriver
  /** Pods with a cgroup, by UID: the burstable QoS cgroup's shares follow them. */
  private readonly pods = new Map<string, V1Pod>()
  private burstable = -1

  constructor(
    support: CgroupSupport,
    private readonly opts: NodeCgroupsOptions,
  ) {
    const name = nodeRootName(opts.nodeName, opts.stateDir)
    if (support.mode === 'v2' && support.v2Dir) this.driver = new CgroupV2(join(support.v2Dir, name))
    else if (support.mode === 'v1' && support.v1Dirs) this.driver = new CgroupV1(new Map([...support.v1Dirs].map(([c, d]) => [c, join(d, name)])))
    else throw new Error(`no cgroups to build on: ${support.reason ?? support.mode}`)
  }

  get version(): 1 | 2 {
    return this.driver.version
  }

  /** The node root and its QoS cgroups (kept if a previous run left them: adoption). */
  setUp(): void {
    const d = this.driver
    d.create('')
    d.apply('', {cpuShares: milliCpuToShares(Math.round(this.opts.cpuCores * 1000)), memoryLimit: Math.floor(this.opts.memoryBytes)})
    d.create(QosDirs.BestEffort)
    d.apply(QosDirs.BestEffort, {cpuShares: MinShares})
    d.create(QosDirs.Burstable)
    this.updateBurstable()
  }

  podPath(pod: V1Pod): string {
    return podCgroupPath(podQos(pod), pod.metadata!.uid!)
  }

  /**
   * Makes (or finds) the pod's cgroup and gives it the pod's resources: when made now, or the first time this node
   * process sees it (adoption); later, only resize() changes them.
   */
  ensurePod(pod: V1Pod): string {
    const path = this.podPath(pod)
    const uid = pod.metadata!.uid!
    const fresh = this.driver.create(path)
    if (fresh || !this.pods.has(uid)) this.driver.apply(path, podResources(pod, this.opts.podPidsLimit ?? NoLimit), {fresh})
    this.pods.set(uid, pod)
    this.updateBurstable()
    return path
  }

  /** A cgroup for one container instance, with the container's resources. */
  createContainer(pod: V1Pod, container: V1Container, containerID: string): string {
    const path = containerCgroupPath(this.ensurePod(pod), containerID)
    const fresh = this.driver.create(path)
    this.driver.apply(path, containerResources(container), {oomGroup: true, fresh})
    return path
  }

  /**
   * In-place resize: the pod cgroup and each running container's. Growing,
   * the pod goes first (a child's CFS quota may not exceed its parent's);
   * shrinking, the containers do.
   */
  resize(pod: V1Pod, containers: Array<{spec: V1Container; path: string}>): void {
    const podPath = this.podPath(pod)
    const podConfig = podResources(pod, this.opts.podPidsLimit ?? NoLimit)
    const applyContainers = () => {
      for (const c of containers) if (this.driver.exists(c.path)) this.driver.apply(c.path, containerResources(c.spec))
    }
    try {
      this.driver.apply(podPath, podConfig)
      applyContainers()
    } catch {
      applyContainers()
      this.driver.apply(podPath, podConfig)
    }
    this.pods.set(pod.metadata!.uid!, pod)
    this.updateBurstable()
  }

  private updateBurstable(): void {
    const shares = burstableShares([...this.pods.values()])
    if (shares === this.burstable) return
    this.driver.apply(QosDirs.Burstable, {cpuShares: shares})
    this.burstable = shares
  }

  /**
   * Moves a process into a cgroup. One already gone (ESRCH: a program that
   * exits at once can end before it is placed) is not a failure of its start:
   * its exit, with its own code, is what the container reports.
   */
  async place(path: string, pid: number): Promise<void> {
    try {
      await this.driver.place(path, pid)
    } catch (error) {
      if (((error as Error).cause as NodeJS.ErrnoException | undefined)?.code !== 'ESRCH') throw error
    }
  }

  /** The cgroup.procs files of a cgroup (exec joins its container's cgroups through them). */
  procsFiles(path: string): string[] {
    return this.driver.procsFiles(path)
  }

  /** A process and the children it already started (an exec through nsenter --fork), best effort for the children. */
  async placeTree(path: string, pid: number): Promise<void> {
    await this.driver.place(path, pid)
    for (const child of childPids(pid)) {
      try {
        await this.placeTree(path, child)
      } catch {
        /* ended meanwhile */
      }
    }
  }

  oomKills(path: string): number {
    return this.driver.oomKills(path)
  }

  usage(path: string): CgroupUsage | undefined {
    return this.driver.usage(path)
  }

  procs(path: string): number[] {
    return this.driver.procs(path)
  }

  contains(path: string, pid: number): boolean {
    return this.driver.contains(path, pid)
  }

  /**
   * Kills every process of the cgroup (frozen first, so none can fork while
   * the others die) and waits until it is empty. True once empty.
   */
  async kill(path: string, waitMs = DefaultCgroupKillWaitMs): Promise<boolean> {
    const d = this.driver
    const deadline = Date.now() + waitMs
    while (Date.now() <= deadline) {
      const pids = d.procs(path)
      if (pids.length === 0) return true
      this.killNow(path)
      await new Promise((r) => setTimeout(r, DefaultCgroupKillPollMs))
    }
    return d.procs(path).length === 0
  }

  /** One round of SIGKILL to every process of the cgroup, without waiting (adoption's leftovers; removed by sweep). */
  killNow(path: string): void {
    const d = this.driver
    if (d.killAll(path)) return
    const frozen = d.freeze(path, true)
    for (const pid of d.procs(path)) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        /* gone */
      }
    }
    if (frozen) d.freeze(path, false)
  }

  /** Kills what is left in a cgroup and removes it. */
  async removeCgroup(path: string): Promise<void> {
    if (!this.driver.exists(path)) return
    await this.kill(path)
    this.driver.remove(path)
  }

  async removePod(pod: V1Pod): Promise<void> {
    const uid = pod.metadata!.uid!
    await this.removeCgroup(this.podPath(pod))
    if (this.pods.delete(uid)) this.updateBurstable()
  }

  /** Pod cgroups found under the node root (a previous run's): path and UID. */
  podCgroups(): Array<{path: string; uid: string}> {
    const out: Array<{path: string; uid: string}> = []
    for (const qos of [QosDirs.Guaranteed, QosDirs.Burstable, QosDirs.BestEffort]) {
      for (const name of this.driver.children(qos)) {
        const path = qos ? `${qos}/${name}` : name
        const uid = podUidOf(path)
        if (uid && name.startsWith('pod')) out.push({path, uid})
      }
    }
    return out
  }

  /** Container cgroups of a pod cgroup. */
  containerCgroups(podPath: string): string[] {
    return this.driver.children(podPath).map((n) => `${podPath}/${n}`)
  }

  /**
   * After adoption: kills and removes what a previous run left that is not
   * kept, the cgroups of pods not in `pods` and of container instances not
   * in `containers` (paths).
   */
  async sweep(pods: ReadonlySet<string>, containers: ReadonlySet<string>): Promise<void> {
    for (const p of this.podCgroups()) {
      if (!pods.has(p.uid)) await this.removeCgroup(p.path)
      else for (const c of this.containerCgroups(p.path)) if (!containers.has(c)) await this.removeCgroup(c)
    }
  }

  /** The node stops: everything under the node root is killed and the tree removed. */
  async close(): Promise<void> {
    await this.removeCgroup('')
    this.pods.clear()
  }

  get rootDirs(): string[] {
    return this.driver.rootDirs
  }
}

/** /proc/<pid>/task/<pid>/children: the process's children (its main thread's). */
function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}
