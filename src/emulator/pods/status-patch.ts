import type {V1ContainerState, V1ContainerStatus, V1PodStatus} from '@kubernetes/client-node'

/** Optional fields of a pod condition that a newer condition of the same type may no longer carry. */
const ConditionOptionalFields = ['reason', 'message', 'lastProbeTime'] as const

/**
 * The patch: metadata.uid (the precondition) and the full status; top-level
 * fields we no longer report (reason, message) are cleared explicitly. The
 * API merges conditions by type, keeping fields the patch leaves out, so a
 * condition's reason and message are cleared explicitly too (a Ready=True
 * must not keep the ContainersNotReady reason of its Ready=False).
 */
export function patchBody(uid: string, status: V1PodStatus, before: V1PodStatus | undefined): Record<string, unknown> {
  const s: Record<string, unknown> = JSON.parse(JSON.stringify(status))
  for (const k of ['reason', 'message', 'podIP', 'podIPs'] as const) if (before?.[k] !== undefined && status[k] === undefined) s[k] = null
  if (Array.isArray(s.conditions)) {
    for (const c of s.conditions as Array<Record<string, unknown>>) for (const k of ConditionOptionalFields) if (c[k] === undefined) c[k] = null
  }
  // podIPs merge by ip: an address that changed (the node's, then the pod network's) replaces the list, never joins it.
  const ips = (x: V1PodStatus | undefined) => JSON.stringify((x?.podIPs ?? []).map((p) => p.ip))
  if (Array.isArray(s.podIPs) && before?.podIPs?.length && ips(before) !== ips(status)) s.podIPs = [{$patch: 'replace'}, ...(s.podIPs as unknown[])]
  return {metadata: {uid}, status: s}
}

/** A container status as the kubelet owns it: what it reports, not when. */
function containerView(c: V1ContainerStatus) {
  const kind = (s: V1ContainerState | undefined) =>
    s?.running ? 'running' : s?.terminated ? `terminated:${s.terminated.reason ?? ''}:${s.terminated.exitCode}` : s?.waiting ? `waiting:${s.waiting.reason ?? ''}` : ''
  return [c.name, c.ready, c.started ?? false, c.restartCount, c.containerID ?? '', kind(c.state), kind(c.lastState)]
}

/**
 * needsReconcile: the API's status differs from the one written in what the
 * kubelet owns: the phase, reason, message, addresses, the conditions it
 * wrote (status, reason, message) and the container statuses (state,
 * readiness, restarts). Times are not compared: the API keeps seconds.
 */
export function needsReconcile(api: V1PodStatus | undefined, written: V1PodStatus): boolean {
  if (!api) return true
  const top = (s: V1PodStatus) => [s.phase, s.reason ?? '', s.message ?? '', s.podIP ?? '', s.hostIP ?? '']
  // Compared as JSON: the API's lists may come from another realm (a test's VM), where deep equality fails on prototypes.
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)
  if (!same(top(api), top(written))) return true
  for (const c of written.conditions ?? []) {
    const a = api.conditions?.find((x) => x.type === c.type)
    if (!a || a.status !== c.status || (a.reason ?? '') !== (c.reason ?? '') || (a.message ?? '') !== (c.message ?? '')) return true
  }
  for (const list of ['initContainerStatuses', 'containerStatuses', 'ephemeralContainerStatuses'] as const) {
    if (!same((written[list] ?? []).map(containerView), (api[list] ?? []).map(containerView))) return true
  }
  return false
}
