import type {V1Container, V1ContainerStatus, V1Pod, V1PodCondition} from '@kubernetes/client-node'

/**
 * The kubelet's pod conditions (status/generate.go): Initialized,
 * ContainersReady and Ready with their reasons and messages, transition
 * times that move only with the status, and the observed generation.
 */

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown'

export function isSidecar(c: V1Container): boolean {
  return c.restartPolicy === 'Always'
}

export function hasAnyRegularContainerStarted(statuses: V1ContainerStatus[]): boolean {
  return statuses.some((s) => !!s.state?.running || !!s.state?.terminated || !!s.lastState?.terminated)
}

const list = (names: string[]) => `[${names.join(' ')}]`

export function condition(type: string, status: boolean, reason?: string, message?: string): V1PodCondition {
  return {type, status: status ? 'True' : 'False', ...(reason ? {reason} : {}), ...(message ? {message} : {})}
}

export function initializedCondition(pod: V1Pod, phase: PodPhase, initStatuses: V1ContainerStatus[], statuses: V1ContainerStatus[]): V1PodCondition {
  const inits = pod.spec!.initContainers ?? []
  if (inits.length > 0 && initStatuses.length === 0) return condition('Initialized', false, 'UnknownContainerStatuses')
  const unknown: string[] = []
  const incomplete: string[] = []
  for (const c of inits) {
    const s = initStatuses.find((x) => x.name === c.name)
    if (!s) unknown.push(c.name)
    else if (isSidecar(c) ? s.started !== true : s.ready !== true) incomplete.push(c.name)
  }
  if (phase === 'Succeeded' && unknown.length === 0) return condition('Initialized', true, 'PodCompleted')
  if (hasAnyRegularContainerStarted(statuses)) return condition('Initialized', true)
  if (unknown.length || incomplete.length) {
    const parts = [...(unknown.length ? [`containers with unknown status: ${list(unknown)}`] : []), ...(incomplete.length ? [`containers with incomplete status: ${list(incomplete)}`] : [])]
    return condition('Initialized', false, 'ContainersNotInitialized', parts.join(', '))
  }
  return condition('Initialized', true)
}

export function containersReadyCondition(pod: V1Pod, phase: PodPhase, initStatuses: V1ContainerStatus[], statuses: V1ContainerStatus[]): V1PodCondition {
  // A terminal pod is never ready (the status manager forces this before patching).
  if (phase === 'Succeeded') return condition('ContainersReady', false, 'PodCompleted')
  if (phase === 'Failed') return condition('ContainersReady', false, 'PodFailed')
  if (statuses.length === 0) return condition('ContainersReady', false, 'UnknownContainerStatuses')
  const unknown: string[] = []
  const unready: string[] = []
  const check = (name: string, s: V1ContainerStatus | undefined) => {
    if (!s) unknown.push(name)
    else if (!s.ready) unready.push(name)
  }
  for (const c of (pod.spec!.initContainers ?? []).filter(isSidecar))
    check(
      c.name,
      initStatuses.find((x) => x.name === c.name),
    )
  for (const c of pod.spec!.containers)
    check(
      c.name,
      statuses.find((x) => x.name === c.name),
    )
  if (unknown.length || unready.length) {
    const parts = [...(unknown.length ? [`containers with unknown status: ${list(unknown)}`] : []), ...(unready.length ? [`containers with unready status: ${list(unready)}`] : [])]
    return condition('ContainersReady', false, 'ContainersNotReady', parts.join(', '))
  }
  return condition('ContainersReady', true)
}

export function readyCondition(pod: V1Pod, containersReady: V1PodCondition): V1PodCondition {
  if (containersReady.status !== 'True') return {...containersReady, type: 'Ready'}
  const problems: string[] = []
  for (const gate of pod.spec!.readinessGates ?? []) {
    const c = pod.status?.conditions?.find((x) => x.type === gate.conditionType)
    if (!c) problems.push(`corresponding condition of pod readiness gate "${gate.conditionType}" does not exist.`)
    else if (c.status !== 'True') problems.push(`the status of pod readiness gate "${gate.conditionType}" is not "True", but ${c.status}`)
  }
  if (problems.length) return condition('Ready', false, 'ReadinessGatesNotReady', problems.join(', '))
  return condition('Ready', true)
}

/** lastTransitionTime moves only when the condition's status changes. */
export function withTransitionTimes(conditions: V1PodCondition[], previous: V1PodCondition[] | undefined, now: Date): V1PodCondition[] {
  return conditions.map((c) => {
    const p = previous?.find((x) => x.type === c.type)
    const at = p && p.status === c.status && p.lastTransitionTime ? new Date(p.lastTransitionTime) : now
    return {...c, lastTransitionTime: at}
  })
}

/**
 * PodObservedGenerationTracking (on by default since 1.34): every condition the
 * kubelet writes carries the generation of the spec it was computed from.
 */
export function withObservedGeneration(conditions: V1PodCondition[], generation: number | undefined): V1PodCondition[] {
  return generation === undefined ? conditions : conditions.map((c) => ({...c, observedGeneration: generation}))
}
