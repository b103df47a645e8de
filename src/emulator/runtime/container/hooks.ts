import type {V1Lifecycle, V1Pod} from '@kubernetes/client-node'
import type {ContainerProcess} from '../process/container-process.js'
import {runHook, type HandlerContext, type HandlerOutcome} from '../probes/handlers.js'
import type {StopDeadline} from './stop-deadline.js'
import {podDesc} from '../../../common/pods.js'
import type {Waiting} from './fields.js'

/** The kubelet's message for a failed postStart hook (lifecycle/handlers.go), which the container's waiting state carries. */
function hookErrorMessage(handler: NonNullable<V1Lifecycle['postStart']>, container: string, pod: V1Pod, r: HandlerOutcome): string {
  if (handler.exec) {
    return `Exec lifecycle hook ([${(handler.exec.command ?? []).join(' ')}]) for Container "${container}" in Pod "${podDesc(pod)}" failed - error: ${r.error ?? r.output}, message: ${JSON.stringify(r.error ? r.output : '')}`
  }
  if (handler.httpGet) return `HTTP lifecycle hook (${handler.httpGet.path ?? ''}) for Container "${container}" in Pod "${podDesc(pod)}" failed - error: ${r.output}`
  return r.output
}

/** Where a container's handlers (probes, hooks) run: its env and cwd, inside its namespaces and cgroups (their cgroup.procs files) when it has some. */
export function handlerContext(proc: ContainerProcess, host: string, ports: HandlerContext['ports'], cgroupProcs: string[] = []): HandlerContext {
  const enter = proc.enterArgv(proc.cwd, cgroupProcs)
  return {env: proc.env, cwd: proc.cwd, host, ports, ...(enter.length > 0 ? {enter} : {})}
}

/**
 * The postStart hook, without a timeout as the kubelet runs it (until the
 * pod terminates): undefined when it succeeded, else the PostStartHookError
 * the container waits with.
 */
export async function runPostStart(handler: NonNullable<V1Lifecycle['postStart']>, hctx: HandlerContext, container: string, pod: V1Pod, signal: AbortSignal): Promise<Waiting | undefined> {
  const r = await runHook(handler, hctx, 2 ** 31 - 1, signal)
  if (r.result !== 'failure') return undefined
  return {reason: 'PostStartHookError', message: hookErrorMessage(handler, container, pod, r)}
}

/**
 * The preStop hook within the stop's deadline: it ends, the container exits
 * by itself, or the deadline (which may move closer meanwhile) passes.
 * Resolves whether it failed while the container still ran.
 */
export async function runPreStop(handler: NonNullable<V1Lifecycle['preStop']>, hctx: HandlerContext, proc: ContainerProcess, deadline: StopDeadline, now: number): Promise<boolean> {
  const hookAbort = new AbortController()
  const hook = runHook(handler, hctx, Math.max(0, deadline.at - now), hookAbort.signal)
  await Promise.race([hook, proc.exited, deadline.passed()])
  hookAbort.abort()
  const r = await hook
  return r.result === 'failure' && proc.exit === undefined
}
