import type {V1Container, V1ContainerStatus, V1EphemeralContainer, V1ObjectReference, V1Pod} from '@kubernetes/client-node'

/** A pod's init containers then its containers (ephemeral ones are not part of the pod's own list). */
export function allContainers(pod: V1Pod | undefined): V1Container[] {
  return [...(pod?.spec?.initContainers ?? []), ...(pod?.spec?.containers ?? [])]
}

/** The statuses of allContainers(pod), in the same order. */
export function allContainerStatuses(pod: V1Pod | undefined): V1ContainerStatus[] {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])]
}

/** The key a pod is known by within a node (`namespace/name`: the same for every UID the name has had). */
export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`
}

/** podKey of a pod object. */
export function podKeyOf(pod: V1Pod): string {
  return podKey(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '')
}

/** `name_namespace(uid)`, as the kubelet names a pod in messages (format.Pod). */
export function podDesc(pod: V1Pod): string {
  return `${pod.metadata?.name ?? ''}_${pod.metadata?.namespace ?? ''}(${pod.metadata?.uid ?? ''})`
}

/** The object reference of a pod, as its events name it. */
export function podRef(pod: V1Pod): V1ObjectReference {
  return {kind: 'Pod', apiVersion: 'v1', namespace: pod.metadata?.namespace, name: pod.metadata?.name, uid: pod.metadata?.uid}
}

/** Succeeded and Failed are final: a pod in either never runs again. */
export function isTerminalPhase(phase: string | undefined): phase is 'Succeeded' | 'Failed' {
  return phase === 'Succeeded' || phase === 'Failed'
}

/** allContainers(pod) and the ephemeral containers (`kubectl debug`): every name a container of the pod may have. */
export function allContainersWithEphemeral(pod: V1Pod | undefined): (V1Container | V1EphemeralContainer)[] {
  return [...allContainers(pod), ...(pod?.spec?.ephemeralContainers ?? [])]
}

/** The statuses of allContainersWithEphemeral(pod). */
export function allContainerStatusesWithEphemeral(pod: V1Pod | undefined): V1ContainerStatus[] {
  return [...allContainerStatuses(pod), ...(pod?.status?.ephemeralContainerStatuses ?? [])]
}
