import {allContainerStatuses, allContainers} from '../../../common/pods.js'
import type {V1Container, V1Pod, V1PodCondition, V1PodStatus, V1ResourceRequirements} from '@kubernetes/client-node'
import {StartError} from '../process/command-errors.js'
import type {NodeCgroups} from './node-cgroups.js'
import {changedResources, infeasibleMessage, resizeCompletedMessage, resizeCondition, resizeNeedsRestart, ResizeInProgressCondition, ResizePendingCondition, statusResources} from './resize.js'
import {hasLimits} from './resources.js'

/** The kubelet's terminated reason for a container the kernel's OOM killer ended. */
export const OOMKilledReason = 'OOMKilled'

/**
 * One pod's share of the node's cgroups, as the pod runtime uses it: the
 * cgroup of each running container instance (by container name), OOM
 * verdicts, the removal of a finished instance's cgroup (with whatever
 * escaped its process group), in-place resize and what the status reports
 * of it. Without cgroups (the plain mode) it only reports resources.
 */
export class PodCgroupState {
  private readonly paths = new Map<string, string>()
  private readonly removing = new Map<string, Promise<void>>()
  /** What each running instance was given: containerStatuses[].resources. */
  private readonly actuated = new Map<string, V1ResourceRequirements>()
  private conditions: V1PodCondition[] = []

  constructor(
    private readonly node: NodeCgroups | undefined,
    private readonly allocatable: {cpuCores: number; memoryBytes: number} | undefined,
  ) {}

  /** Plain mode: one Warning per pod that asks for limits nothing enforces. */
  warnUnenforced(pod: V1Pod, reason: string | undefined, emit: (message: string) => void): void {
    if (!this.node && reason && hasLimits(pod)) emit(`Resource limits of this pod are not enforced: ${reason}`)
  }

  /** The instance's cgroup, made with the container's resources; undefined in plain mode. Throws StartError. */
  createContainer(pod: V1Pod, name: string, spec: V1Container, containerID: string): string | undefined {
    this.actuated.set(name, structuredClone(spec.resources ?? {}))
    if (!this.node) return undefined
    try {
      const path = this.node.createContainer(pod, spec, containerID)
      this.paths.set(name, path)
      return path
    } catch (error) {
      throw new StartError(`failed to create the container's cgroup: ${(error as Error).message}`)
    }
  }

  /** A process of the pod itself (the shared PID namespace's holder) into the pod cgroup; best effort. */
  async placeInPod(pod: V1Pod, pid: number): Promise<void> {
    if (!this.node) return
    try {
      await this.node.place(this.node.ensurePod(pod), pid)
    } catch {
      /* gone already, or the kernel refused: the holder runs nothing of the pod's */
    }
  }

  /** Where an adopted instance lives (its record). */
  adopt(name: string, path: string | undefined, spec: V1Container): void {
    this.actuated.set(name, structuredClone(spec.resources ?? {}))
    if (path && this.node) this.paths.set(name, path)
  }

  containerPath(name: string): string | undefined {
    return this.paths.get(name)
  }

  /** The cgroup.procs files of a container's instance: exec, probes and hooks join them; none without cgroups. */
  containerProcsFiles(name: string): string[] {
    const path = this.paths.get(name)
    return path && this.node ? this.node.procsFiles(path) : []
  }

  /**
   * The instance's main process ended: whether the kernel OOM-killed in its
   * cgroup (read now, before the cgroup goes); then what is left in it is
   * killed and the cgroup removed.
   */
  exited(name: string): boolean {
    const path = this.paths.get(name)
    if (!path || !this.node) return false
    const oom = this.node.oomKills(path) > 0
    this.paths.delete(name)
    this.remove(name, path)
    return oom
  }

  /** Discards the cgroup of an instance that never started. */
  discard(name: string): void {
    const path = this.paths.get(name)
    this.paths.delete(name)
    if (path) this.remove(name, path)
  }

  private remove(name: string, path: string): void {
    const p = this.node!.removeCgroup(path).catch(() => undefined)
    this.removing.set(name, p)
    void p.then(() => {
      if (this.removing.get(name) === p) this.removing.delete(name)
    })
  }

  /** After a stop: every process of the container's cgroup is gone (killed if need be). */
  async drained(name: string): Promise<void> {
    const path = this.paths.get(name)
    if (path && this.node) await this.node.kill(path)
    await this.removing.get(name)
  }

  /** The pod is done: its cgroup, and anything left in it, goes. */
  async removePod(pod: V1Pod): Promise<void> {
    await Promise.all(this.removing.values())
    if (this.node) await this.node.removePod(pod).catch(() => undefined)
  }

  /**
   * An update of the spec: resources that changed are applied to the running
   * containers (or their restart, per resizePolicy). Returns the containers
   * to restart and the ResizeCompleted message when the resize was applied.
   */
  resize(before: V1Pod, after: V1Pod, running: Array<{name: string; spec: V1Container}>): {restart: string[]; completed?: string} {
    const specsBefore = allContainers(before)
    const specsAfter = allContainers(after)
    const changed = specsAfter.filter((c) => changedResources(specsBefore.find((b) => b.name === c.name)?.resources, c.resources).length > 0)
    if (changed.length === 0) return {restart: []}
    const now = new Date()
    const generation = after.metadata?.generation
    const infeasible = this.allocatable && infeasibleMessage(after, this.allocatable)
    if (infeasible) {
      this.conditions = [resizeCondition(ResizePendingCondition, 'Infeasible', infeasible, generation, now)]
      return {restart: []}
    }
    const restart: string[] = []
    const apply: Array<{name: string; spec: V1Container}> = []
    for (const r of running) {
      const c = changed.find((x) => x.name === r.name)
      if (!c) continue
      if (resizeNeedsRestart(c, changedResources(specsBefore.find((b) => b.name === c.name)?.resources, c.resources))) restart.push(r.name)
      else apply.push(r)
    }
    try {
      if (this.node) {
        const containers = apply.flatMap((r) => {
          const path = this.paths.get(r.name)
          return path ? [{spec: r.spec, path}] : []
        })
        this.node.resize(after, containers)
      }
    } catch (error) {
      this.conditions = [resizeCondition(ResizeInProgressCondition, 'Error', (error as Error).message, generation, now)]
      return {restart}
    }
    for (const r of apply) this.actuated.set(r.name, structuredClone(r.spec.resources ?? {}))
    this.conditions = []
    return {restart, completed: resizeCompletedMessage(after)}
  }

  /** containerStatuses[].resources and allocatedResources, and the resize conditions, as the 1.34 kubelet reports them. */
  reportResources(pod: V1Pod, status: V1PodStatus, running: (name: string) => boolean): void {
    const specs = allContainers(pod)
    for (const s of allContainerStatuses({status})) {
      const spec = specs.find((c) => c.name === s.name)
      if (!spec || !s.containerID) continue
      s.resources = statusResources(running(s.name) ? this.actuated.get(s.name) : undefined, spec.resources)
      const requests = spec.resources?.requests
      if (requests && Object.keys(requests).length) s.allocatedResources = structuredClone(requests)
    }
    if (this.conditions.length) status.conditions = this.conditions.map((c) => ({...c}))
  }
}
