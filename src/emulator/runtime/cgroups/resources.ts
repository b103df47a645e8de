import {allContainers} from '../../../common/pods.js'
import type {V1Container, V1Pod, V1ResourceRequirements} from '@kubernetes/client-node'
import {parseQuantity} from '../../quantity.js'

/**
 * What a cgroup is given, computed as the kubelet does (cm/helpers_linux.go
 * ResourceConfigForPod, kuberuntime_container_linux.go calculateLinuxResources,
 * cm/qos_container_manager_linux.go). Pure: the drivers (v1.ts, v2.ts) write it.
 */
export interface ResourceConfig {
  /** v1 cpu.shares (v2: converted to cpu.weight). */
  cpuShares?: number
  /** CFS quota in µs per period; -1 for no limit. */
  cpuQuota?: number
  cpuPeriod?: number
  /** Bytes; -1 for no limit. */
  memoryLimit?: number
  /** -1 for no limit. */
  pidsLimit?: number
}

export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort'

export const MinShares = 2
export const MaxShares = 262_144
export const SharesPerCpu = 1024
/** The kubelet's CFS period (cpuCFSQuotaPeriod, 100 ms) and minimum quota (1 ms), in µs. */
export const DefaultCpuPeriodUs = 100_000
export const MinQuotaUs = 1_000
export const NoLimit = -1

/** Quantity.MilliValue(): rounded up. */
export function milli(q: string | number | undefined): number {
  if (q === undefined || q === null) return 0
  return Math.ceil(parseQuantity(q) * 1000 - 1e-6)
}

/** Quantity.Value(): rounded up. */
export function bytes(q: string | number | undefined): number {
  if (q === undefined || q === null) return 0
  return Math.ceil(parseQuantity(q) - 1e-9)
}

export function milliCpuToShares(m: number): number {
  if (m === 0) return MinShares
  return Math.min(MaxShares, Math.max(MinShares, Math.floor((m * SharesPerCpu) / 1000)))
}

export function milliCpuToQuota(m: number, period = DefaultCpuPeriodUs): number {
  if (m === 0) return 0
  return Math.max(MinQuotaUs, Math.floor((m * period) / 1000))
}

/** cgroup v2 cpu.weight from v1 shares (the kubelet's and runc's conversion). */
export function sharesToWeight(shares: number): number {
  if (shares === 0) return 100
  return 1 + Math.floor(((shares - 2) * 9999) / 262142)
}

const cpuOf = (r: Record<string, string> | undefined) => milli(r?.cpu)
const memOf = (r: Record<string, string> | undefined) => bytes(r?.memory)

/** The container's requests with the API default (requests default to limits) applied. */
function requestsOf(res: V1ResourceRequirements | undefined): Record<string, string> {
  return {...(res?.limits ?? {}), ...(res?.requests ?? {})} as Record<string, string>
}

/** v1qos.GetPodQOS: only cpu and memory count. */
export function podQos(pod: V1Pod): QosClass {
  const known = pod.status?.qosClass
  if (known === 'Guaranteed' || known === 'Burstable' || known === 'BestEffort') return known
  return computeQos(pod)
}

export function computeQos(pod: V1Pod): QosClass {
  const all = allContainers(pod)
  let any = false
  let guaranteed = all.length > 0
  for (const c of all) {
    const req = requestsOf(c.resources)
    const lim = (c.resources?.limits ?? {}) as Record<string, string>
    for (const r of ['cpu', 'memory']) {
      const rq = r === 'cpu' ? milli(req[r]) : bytes(req[r])
      const lm = r === 'cpu' ? milli(lim[r]) : bytes(lim[r])
      if (rq > 0 || lm > 0) any = true
      if (lm === 0 || rq !== lm) guaranteed = false
    }
  }
  if (!any) return 'BestEffort'
  return guaranteed ? 'Guaranteed' : 'Burstable'
}

/** A container's cgroup config (calculateLinuxResources). */
export function containerResources(c: V1Container, pidsLimit = NoLimit): ResourceConfig {
  const req = requestsOf(c.resources)
  const lim = (c.resources?.limits ?? {}) as Record<string, string>
  const cpuReq = cpuOf(req)
  const cpuLim = cpuOf(lim)
  const cpuShares = milliCpuToShares(cpuReq === 0 && cpuLim !== 0 ? cpuLim : cpuReq)
  const memLim = memOf(lim)
  return {
    cpuShares,
    cpuQuota: cpuLim ? milliCpuToQuota(cpuLim) : NoLimit,
    cpuPeriod: DefaultCpuPeriodUs,
    memoryLimit: memLim || NoLimit,
    pidsLimit,
  }
}

interface Totals {
  cpu: number
  memory: number
}

/**
 * resource.PodRequests / PodLimits: regular containers and sidecars summed;
 * an init container counts with the sidecars started before it, and the
 * pod takes the larger of the two; plus the pod overhead.
 */
export function podTotals(pod: V1Pod, pick: (c: V1Container) => Record<string, string>): Totals {
  const sum: Totals = {cpu: 0, memory: 0}
  const add = (t: Totals, r: Record<string, string>) => {
    t.cpu += cpuOf(r)
    t.memory += memOf(r)
  }
  for (const c of pod.spec?.containers ?? []) add(sum, pick(c))
  const sidecars: Totals = {cpu: 0, memory: 0}
  let initMax: Totals = {cpu: 0, memory: 0}
  for (const c of pod.spec?.initContainers ?? []) {
    if (c.restartPolicy === 'Always') {
      add(sum, pick(c))
      add(sidecars, pick(c))
      continue
    }
    const t: Totals = {cpu: sidecars.cpu, memory: sidecars.memory}
    add(t, pick(c))
    initMax = {cpu: Math.max(initMax.cpu, t.cpu), memory: Math.max(initMax.memory, t.memory)}
  }
  const overhead = (pod.spec?.overhead ?? {}) as Record<string, string>
  return {cpu: Math.max(sum.cpu, initMax.cpu) + cpuOf(overhead), memory: Math.max(sum.memory, initMax.memory) + memOf(overhead)}
}

/** The pod cgroup's config (ResourceConfigForPod, CFS quota enforced). */
export function podResources(pod: V1Pod, pidsLimit = NoLimit): ResourceConfig {
  const all = allContainers(pod)
  const reqs = podTotals(pod, (c) => requestsOf(c.resources))
  const lims = podTotals(pod, (c) => (c.resources?.limits ?? {}) as Record<string, string>)
  const cpuDeclared = all.every((c) => cpuOf(c.resources?.limits as Record<string, string>) > 0)
  const memDeclared = all.every((c) => memOf(c.resources?.limits as Record<string, string>) > 0)
  const qos = podQos(pod)
  if (qos === 'BestEffort') return {cpuShares: MinShares, cpuQuota: NoLimit, cpuPeriod: DefaultCpuPeriodUs, memoryLimit: NoLimit, pidsLimit}
  const guaranteed = qos === 'Guaranteed'
  return {
    cpuShares: milliCpuToShares(reqs.cpu),
    cpuQuota: guaranteed || cpuDeclared ? milliCpuToQuota(lims.cpu) || NoLimit : NoLimit,
    cpuPeriod: DefaultCpuPeriodUs,
    memoryLimit: guaranteed || memDeclared ? lims.memory || NoLimit : NoLimit,
    pidsLimit,
  }
}

/** Whether the pod asks for limits a node without cgroups cannot enforce. */
export function hasLimits(pod: V1Pod): boolean {
  return allContainers(pod).some((c) => cpuOf(c.resources?.limits as Record<string, string>) > 0 || memOf(c.resources?.limits as Record<string, string>) > 0)
}

/** The burstable QoS cgroup's shares: the sum of its pods' cpu requests (qos_container_manager setCPUCgroupConfig). */
export function burstableShares(pods: V1Pod[]): number {
  let m = 0
  for (const p of pods) if (podQos(p) === 'Burstable') m += podTotals(p, (c) => requestsOf(c.resources)).cpu
  return milliCpuToShares(m)
}
