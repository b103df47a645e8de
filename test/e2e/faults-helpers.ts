import type {CoreV1Api, CoreV1Event, V1Container, V1Pod} from '@kubernetes/client-node'
import {readdirSync, readlinkSync} from 'node:fs'
import {waitFor} from './helpers.js'

export {NODE, nodeContainer} from './helpers.js'

/** A pod bound to the node directly (no scheduler, no taints involved). */
export function podOn(node: string, namespace: string, name: string, containers: V1Container[], spec: Partial<V1Pod['spec']> = {}): V1Pod {
  return {metadata: {name, namespace}, spec: {nodeName: node, automountServiceAccountToken: false, terminationGracePeriodSeconds: 2, containers, ...spec}}
}

/** Creates the pod in its namespace (made by createNamespace, so its ServiceAccount exists). */
export function createPod(core: CoreV1Api, pod: V1Pod): Promise<V1Pod> {
  return core.createNamespacedPod({namespace: pod.metadata!.namespace!, body: pod})
}

export async function readPod(core: CoreV1Api, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await core.readNamespacedPod({name, namespace})
  } catch {
    return undefined
  }
}

export function containerStatus(pod: V1Pod | undefined, name: string) {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])].find((c) => c.name === name)
}

export async function waitPod(core: CoreV1Api, namespace: string, name: string, pred: (p: V1Pod) => boolean, what: string, timeoutMs = 30_000): Promise<V1Pod> {
  let last: V1Pod | undefined
  return waitFor(
    async () => {
      last = await readPod(core, namespace, name)
      return last && pred(last) ? last : undefined
    },
    () => `${namespace}/${name}: ${what} (last status: ${JSON.stringify(last?.status)})`,
    timeoutMs,
    250,
  )
}

/**
 * The namespace's events, once the pod has one with this reason: events
 * are written apart from (and can land after) the status that tells of them.
 */
export async function eventsOnceSeen(core: CoreV1Api, namespace: string, pod: string, reason: string, timeoutMs = 15_000): Promise<CoreV1Event[]> {
  return waitFor(
    async () => {
      const {items} = await core.listNamespacedEvent({namespace})
      return items.some((e) => e.involvedObject.name === pod && e.reason === reason) ? items : undefined
    },
    `${pod}'s ${reason} event`,
    timeoutMs,
    200,
  )
}

/** Open file descriptors of a process. */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}

export function cwdOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/cwd`)
  } catch {
    return undefined
  }
}
