import type {V1Container, V1Pod, V1PodCondition, V1ResourceRequirements} from '@kubernetes/client-node'
import {bytes, milli, podTotals} from './resources.js'

/**
 * In-place resize (`kubectl patch pod --subresource resize`), as the 1.34
 * kubelet's allocation manager decides it (allocation/allocation_manager.go):
 * a resize the node cannot hold at all is PodResizePending/Infeasible; one
 * applied leaves no condition and a ResizeCompleted event; one the kernel
 * refused is PodResizeInProgress/Error. Pure.
 */

export const ResizePendingCondition = 'PodResizePending'
export const ResizeInProgressCondition = 'PodResizeInProgress'

type Resource = 'cpu' | 'memory'

/** Which of cpu and memory differ between two requirements (requests or limits). */
export function changedResources(before: V1ResourceRequirements | undefined, after: V1ResourceRequirements | undefined): Resource[] {
  const out: Resource[] = []
  for (const r of ['cpu', 'memory'] as const) {
    const q = r === 'cpu' ? milli : bytes
    const get = (x: V1ResourceRequirements | undefined, k: 'requests' | 'limits') => q((x?.[k] as Record<string, string> | undefined)?.[r])
    if (get(before, 'requests') !== get(after, 'requests') || get(before, 'limits') !== get(after, 'limits')) out.push(r)
  }
  return out
}

/** A changed resource whose resizePolicy says RestartContainer: the container is restarted to apply it. */
export function resizeNeedsRestart(c: V1Container, changed: Resource[]): boolean {
  return changed.some((r) => c.resizePolicy?.find((p) => p.resourceName === r)?.restartPolicy === 'RestartContainer')
}

/** canResizePod's capacity check: the reason message, or undefined when the node can hold the pod. */
export function infeasibleMessage(pod: V1Pod, allocatable: {cpuCores: number; memoryBytes: number}): string | undefined {
  const reqs = podTotals(pod, (c) => ({...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {})}) as Record<string, string>)
  const cpu = Math.round(allocatable.cpuCores * 1000)
  const mem = Math.floor(allocatable.memoryBytes)
  if (reqs.memory > mem) return `Node didn't have enough capacity: memory, requested: ${reqs.memory}, capacity: ${mem}`
  if (reqs.cpu > cpu) return `Node didn't have enough capacity: cpu, requested: ${reqs.cpu}, capacity: ${cpu}`
  return undefined
}

function sortedList(r: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!r || Object.keys(r).length === 0) return undefined
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1)))
}

/** Go's JSON of a ResourceRequirements: keys sorted, empty lists left out. */
function resourcesJson(r: V1ResourceRequirements | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const limits = sortedList(r?.limits as Record<string, string> | undefined)
  const requests = sortedList(r?.requests as Record<string, string> | undefined)
  if (limits) out.limits = limits
  if (requests) out.requests = requests
  return out
}

/** podResizeCompletionMsg. */
export function resizeCompletedMessage(pod: V1Pod): string {
  const summary: Record<string, unknown> = {}
  const list = (cs: V1Container[] | undefined) => (cs ?? []).map((c) => ({name: c.name, resources: resourcesJson(c.resources)}))
  if (pod.spec?.initContainers?.length) summary.initContainers = list(pod.spec.initContainers)
  if (pod.spec?.containers?.length) summary.containers = list(pod.spec.containers)
  return `Pod resize completed: ${JSON.stringify(summary)}`
}

export function resizeCondition(type: string, reason: string, message: string, observedGeneration: number | undefined, now: Date): V1PodCondition {
  return {
    type,
    status: 'True',
    ...(reason ? {reason} : {}),
    ...(message ? {message} : {}),
    lastProbeTime: now,
    lastTransitionTime: now,
    ...(observedGeneration !== undefined ? {observedGeneration} : {}),
  } as V1PodCondition
}

/** containerStatuses[].resources: what the container runs with (allocated, for one not running). */
export function statusResources(actuated: V1ResourceRequirements | undefined, spec: V1ResourceRequirements | undefined): V1ResourceRequirements {
  const r = structuredClone(actuated ?? spec ?? {})
  const out: V1ResourceRequirements = {}
  if (r.limits && Object.keys(r.limits).length) out.limits = r.limits
  if (r.requests && Object.keys(r.requests).length) out.requests = r.requests
  return out
}
