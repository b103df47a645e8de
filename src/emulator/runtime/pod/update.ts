import {EventReason} from '../../kube/event-reasons.js'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {allContainers} from '../../../common/pods.js'
import {RestartAnnotation} from '../../../common/labels.js'
import type {ContainerHost} from '../container/host.js'
import type {ContainerState} from '../container/state.js'
import {stopContainer} from '../container/stop.js'

/** The pod's ephemeral containers, as containers (their fields are a subset). */
export function ephemeralSpecs(pod: V1Pod): V1Container[] {
  return (pod.spec?.ephemeralContainers ?? []) as V1Container[]
}

/**
 * An update of the pod (host.pod is the new one): an in-place resize of the
 * running containers' cgroups, or their restart where resizePolicy says so;
 * a changed image restarts its container; `kubectl debug` adds ephemeral
 * containers (only ever added: the next sync starts them); a changed
 * restart annotation restarts the container it names (restartRequested).
 */
export function applySpecChange(host: ContainerHost, before: V1Pod, addEphemeral: (spec: V1Container) => void): void {
  const pod = host.pod
  const specs = allContainers(pod)
  const running = host.containers.filter((c) => c.running && !c.stopping).map((c) => ({name: c.name, spec: specs.find((s) => s.name === c.name) ?? c.spec}))
  const resized = host.sandbox.cgroup.resize(before, pod, running)
  for (const name of resized.restart)
    restart(
      host,
      host.containers.find((x) => x.name === name),
      'resize requires restart',
    )
  if (resized.completed) host.podEvent('Normal', EventReason.ResizeCompleted, resized.completed)
  for (const c of host.containers) {
    const spec = specs.find((s) => s.name === c.name)
    if (!spec) continue
    const changed = c.running && c.runningImage !== undefined && spec.image !== c.runningImage
    c.respec(spec)
    if (changed) restart(host, c, 'definition changed, will be restarted')
  }
  for (const e of ephemeralSpecs(pod)) if (!host.containers.some((c) => c.name === e.name)) addEphemeral(e)
  const asked = restartRequested(before, pod)
  if (asked)
    restart(
      host,
      host.containers.find((x) => x.name === asked.container && x.kind !== 'ephemeral' && x.kind !== 'init'),
      `restart requested (${RestartAnnotation}=${asked.value}), will be restarted`,
    )
}

/** A restart annotation's value: `<container>:<generation>`. */
export function parseRestartRequest(value: string | undefined): {container: string; generation: string} | undefined {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?):(\S+)$/.exec(value ?? '')
  return m ? {container: m[1], generation: m[3]} : undefined
}

/**
 * Whether an update asks for a container's restart: the restart annotation
 * is valid and differs from the one before (`kubectl vnode dev` bumps its
 * generation on each save). A pod created with it restarts nothing: the
 * value is only a marker to change.
 */
export function restartRequested(before: V1Pod, after: V1Pod): {container: string; value: string} | undefined {
  const value = after.metadata?.annotations?.[RestartAnnotation]
  const request = parseRestartRequest(value)
  if (!request || value === before.metadata?.annotations?.[RestartAnnotation]) return undefined
  return {container: request.container, value: value!}
}

/** Restarts a running container at once (no back-off) once it has stopped, unless nothing will start again. */
function restart(host: ContainerHost, c: ContainerState | undefined, why: string): void {
  if (!c || host.end.finished) return
  c.restartSoon()
  void stopContainer(host, c, `Container ${c.name} ${why}`, host.podGraceMs())
}
