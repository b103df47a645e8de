import {allContainerStatuses, isTerminalPhase} from '../common/pods.js'
import type {V1Pod} from '@kubernetes/client-node'

/** The NodeLost reason kubectl prints as Unknown. */
const NodeUnreachablePodReason = 'NodeLost'

export interface PodRow {
  namespace: string
  name: string
  ready: string
  status: string
  restarts: string
  age: string
  node: string
  ip: string
}

/**
 * The STATUS column exactly as kubectl's printer computes it (printPod in
 * pkg/printers/internalversion/printers.go): Init:N/M, CrashLoopBackOff,
 * Completed, Terminating, Signal:N, ExitCode:N, and admission reasons.
 */
export function podStatus(pod: V1Pod): string {
  const status = pod.status ?? {}
  let reason = status.reason || status.phase || ''
  const restartableInit = new Set((pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always').map((c) => c.name))
  const initCount = pod.spec?.initContainers?.length ?? 0
  let initializing = false
  const inits = status.initContainerStatuses ?? []
  for (let i = 0; i < inits.length; i++) {
    const c = inits[i]
    const term = c.state?.terminated
    const wait = c.state?.waiting
    if (term && term.exitCode === 0) continue
    if (restartableInit.has(c.name) && c.started) continue
    if (term) {
      if (term.reason) reason = `Init:${term.reason}`
      else if (term.signal) reason = `Init:Signal:${term.signal}`
      else reason = `Init:ExitCode:${term.exitCode}`
    } else if (wait?.reason && wait.reason !== 'PodInitializing') {
      reason = `Init:${wait.reason}`
    } else {
      reason = `Init:${i}/${initCount}`
    }
    initializing = true
    break
  }
  if (!initializing || isPodInitializedConditionTrue(pod)) {
    let hasRunning = false
    const cs = status.containerStatuses ?? []
    for (let i = cs.length - 1; i >= 0; i--) {
      const c = cs[i]
      const wait = c.state?.waiting
      const term = c.state?.terminated
      if (wait?.reason) reason = wait.reason
      else if (term?.reason) reason = term.reason
      else if (term && !term.reason) reason = term.signal ? `Signal:${term.signal}` : `ExitCode:${term.exitCode}`
      else if (c.ready && c.state?.running) hasRunning = true
    }
    if (reason === 'Completed' && hasRunning) reason = hasPodReadyCondition(pod) ? 'Running' : 'NotReady'
  }
  if (pod.metadata?.deletionTimestamp && status.reason === NodeUnreachablePodReason) reason = 'Unknown'
  else if (pod.metadata?.deletionTimestamp && !isTerminalPhase(status.phase)) reason = 'Terminating'
  return reason
}

function isPodInitializedConditionTrue(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Initialized' && c.status === 'True')
}

function hasPodReadyCondition(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
}

/** READY column: ready/total regular containers plus started restartable init containers. */
export function podReady(pod: V1Pod): string {
  const total = (pod.spec?.containers?.length ?? 0) + (pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always').length
  const ready =
    (pod.status?.containerStatuses ?? []).filter((c) => c.ready).length +
    (pod.status?.initContainerStatuses ?? []).filter((c) => c.ready && pod.spec?.initContainers?.find((i) => i.name === c.name)?.restartPolicy === 'Always').length
  return `${ready}/${total}`
}

/** RESTARTS column: the count, with the age of the last restart as kubectl shows it. */
export function podRestarts(pod: V1Pod, now = Date.now()): string {
  let restarts = 0
  let last: Date | undefined
  for (const c of allContainerStatuses(pod)) {
    restarts += c.restartCount ?? 0
    const finished = c.lastState?.terminated?.finishedAt
    if (finished && (!last || new Date(finished) > last)) last = new Date(finished)
  }
  return last && restarts > 0 ? `${restarts} (${humanAge(now - last.getTime())} ago)` : String(restarts)
}

/** kubectl's HumanDuration: 45s, 3m20s, 5h, 2d3h, 400d. */
export function humanAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 120) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`
  if (m < 180) return `${m}m`
  const h = Math.floor(m / 60)
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`
  if (h < 48) return `${h}h`
  const d = Math.floor(h / 24)
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`
  if (d < 365 * 2) return `${d}d`
  return `${Math.floor(d / 365)}y`
}

export function podRow(pod: V1Pod, now = Date.now()): PodRow {
  const created = pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).getTime() : now
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    ready: podReady(pod),
    status: podStatus(pod),
    restarts: podRestarts(pod, now),
    age: humanAge(now - created),
    node: pod.spec?.nodeName ?? '<none>',
    ip: pod.status?.podIP ?? '<none>',
  }
}
