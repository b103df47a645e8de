import {allContainerStatuses} from '../common/pods.js'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {parseQuantity} from './quantity.js'

/**
 * A pod's effective resource requests as the kubelet's resource helpers count
 * them: what admission checks against allocatable and the dashboard shows.
 */

/** Requests in base units: cpu in millicores, memory and storage in bytes (what the kubelet's message prints). */
export type Requests = Record<string, number>

function containerRequests(c: V1Container): Requests {
  const out: Requests = {}
  for (const [k, v] of Object.entries({...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {})})) {
    // As the API defaults: a request missing but a limit set means request = limit.
    const value = parseQuantity(String(v))
    out[k] = k === 'cpu' ? Math.round(value * 1000) : Math.ceil(value)
  }
  return out
}

/**
 * What the node allocated to each container, as its status reports it
 * (allocatedResources): a resize the node could not take leaves the spec
 * asking for more than the container holds, and only the allocation counts.
 */
function allocatedRequests(pod: V1Pod): Map<string, Requests> {
  const out = new Map<string, Requests>()
  for (const s of allContainerStatuses(pod)) {
    if (s.allocatedResources && Object.keys(s.allocatedResources).length) out.set(s.name, containerRequests({name: s.name, resources: {requests: s.allocatedResources}}))
  }
  return out
}

export function addRequests(into: Requests, r: Requests): void {
  for (const [k, v] of Object.entries(r)) into[k] = (into[k] ?? 0) + v
}

function max(into: Requests, r: Requests): void {
  for (const [k, v] of Object.entries(r)) into[k] = Math.max(into[k] ?? 0, v)
}

/**
 * The pod's effective requests (resource helpers PodRequests): sum of regular
 * containers and sidecars, max'ed with each init container plus the sidecars
 * started before it, plus overhead.
 */
export function podRequests(pod: V1Pod): Requests {
  const total: Requests = {}
  const allocated = allocatedRequests(pod)
  const requests = (c: V1Container) => ({...containerRequests(c), ...allocated.get(c.name)})
  for (const c of pod.spec?.containers ?? []) addRequests(total, requests(c))
  const sidecars: Requests = {}
  const initMax: Requests = {}
  for (const c of pod.spec?.initContainers ?? []) {
    const r = requests(c)
    if (c.restartPolicy === 'Always') {
      addRequests(sidecars, r)
      addRequests(total, r)
    } else {
      const withSidecars = {...sidecars}
      addRequests(withSidecars, r)
      max(initMax, withSidecars)
    }
  }
  max(total, initMax)
  for (const [k, v] of Object.entries(pod.spec?.overhead ?? {})) addRequests(total, {[k]: k === 'cpu' ? Math.round(parseQuantity(String(v)) * 1000) : Math.ceil(parseQuantity(String(v)))})
  return total
}
