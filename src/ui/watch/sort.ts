import type {V1Pod} from '@kubernetes/client-node'

export function sortPodsByName(pods: V1Pod[]): V1Pod[] {
  return pods.sort((a, b) => (a.metadata?.namespace ?? '').localeCompare(b.metadata?.namespace ?? '') || (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''))
}
