import type {V1Pod} from '@kubernetes/client-node'
import {podList} from './pods-printer.js'

/** kubectl get -o json|yaml hides managedFields unless --show-managed-fields. */
function withoutManagedFields(pod: V1Pod): V1Pod {
  return pod.metadata?.managedFields ? {...pod, metadata: {...pod.metadata, managedFields: undefined}} : pod
}

/**
 * Pods as the API server's JSON (field names and RFC 3339 times), not as the
 * client's model objects: client-node's own ObjectSerializer does that mapping.
 * It is not re-exported from the package root, hence the deep import.
 */
export async function serializePods(pods: V1Pod[]): Promise<Record<string, unknown>> {
  const {ObjectSerializer} = await import('@kubernetes/client-node/dist/serializer.js')
  const list = podList(pods)
  return {...list, items: list.items.map((p) => ObjectSerializer.serialize(withoutManagedFields(p), 'V1Pod') as unknown)}
}

export async function serializePod(pod: V1Pod): Promise<Record<string, unknown>> {
  const {ObjectSerializer} = await import('@kubernetes/client-node/dist/serializer.js')
  return ObjectSerializer.serialize({...withoutManagedFields(pod), apiVersion: 'v1', kind: 'Pod'}, 'V1Pod') as Record<string, unknown>
}

export async function toYaml(obj: Record<string, unknown>): Promise<string> {
  const {dumpYaml} = await import('@kubernetes/client-node')
  return dumpYaml(obj)
}
