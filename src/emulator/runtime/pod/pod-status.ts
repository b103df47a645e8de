import type {V1Pod, V1PodStatus} from '@kubernetes/client-node'
import type {Clock, ClockTimer} from '../../../common/clock.js'
import {SandboxKilledReason, SandboxWaitingReason} from '../../provider/handler.js'
import type {ContainerState} from '../container/state.js'
import type {PodSandbox} from '../sandbox/pod-sandbox.js'

/** A pod-level outcome the runtime decides itself (the rest is the status manager's). */
export interface PodOutcome {
  phase: 'Failed'
  reason: string
  message: string
}

/** What the pod's status is made of. */
export interface PodStatusSource {
  readonly pod: V1Pod
  readonly containers: readonly ContainerState[]
  readonly sandbox: PodSandbox
  readonly clock: Clock
  readonly outcome: PodOutcome | undefined
  /** The sandbox is gone (termination.ts): the pod is not ready to start containers. */
  readonly sandboxReleased: boolean
  /** The pod is being killed with its sidecars (termination.ts finish): reports wait for the kill's end. */
  readonly killingPod: boolean
  /** Closed: nothing is reported any more. */
  readonly closed: boolean
  /** Applies the container exits whose relist has come (unseen-exits.ts), before a report. */
  seeDueExits(): void
}

/** The waiting reason of a container that has not started: PodInitializing while the pod has init containers. */
export function defaultWaiting(pod: V1Pod): string {
  return (pod.spec?.initContainers?.length ?? 0) > 0 ? 'PodInitializing' : 'ContainerCreating'
}

/** The pod's status as the runtime sees it now (the kubelet's relist view: generateAPIPodStatus' part of it). */
export function podStatus(src: Omit<PodStatusSource, 'closed'>): V1PodStatus {
  const {pod, containers, sandbox} = src
  const now = src.clock.now()
  const def = defaultWaiting(pod)
  const ephemerals = containers.filter((c) => c.kind === 'ephemeral')
  const status: V1PodStatus = {
    ...pod.status,
    initContainerStatuses: containers.filter((c) => c.kind === 'init' || c.kind === 'sidecar').map((c) => c.status(def, now)),
    containerStatuses: containers
      .filter((c) => c.kind === 'regular')
      .map((c) => c.status(def, now))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  }
  if ((pod.spec?.initContainers?.length ?? 0) === 0) delete status.initContainerStatuses
  if (ephemerals.length > 0) status.ephemeralContainerStatuses = ephemerals.map((c) => c.status('ContainerCreating', now))
  sandbox.cgroup.reportResources(pod, status, (name) => containers.find((c) => c.name === name)?.running ?? false)
  if (src.outcome) Object.assign(status, src.outcome)
  Object.assign(status, sandbox.net.statusFields())
  // The kubelet creates the sandbox only once the volumes are mounted: until then, none (and no IP), to the end.
  // A sandbox that went before the pod terminated (a finished pod's sidecars went with it) is not ready either.
  const held = !sandbox.volumes && sandbox.mountFailures > 0 ? SandboxWaitingReason : src.sandboxReleased ? SandboxKilledReason : undefined
  if (held) status.conditions = [...(status.conditions ?? []).filter((c) => c.type !== 'PodReadyToStartContainers'), {type: 'PodReadyToStartContainers', status: 'False', reason: held}]
  return status
}

/** When the relist will see the starts not seen yet (epoch ms), in the order of the containers. */
export function unseenStarts(containers: readonly ContainerState[], now: number): number[] {
  return containers
    .filter((c) => c.proc && !c.observed(now))
    .map((c) => c.unobserved!.until)
    .filter(Number.isFinite)
}

/** The pod's reports: a fresh copy whenever the status changes, and once more when a start becomes visible at its relist. */
export class PodStatusReporter {
  private lastNotified = ''
  private observeTimer: ClockTimer | undefined

  constructor(
    private readonly src: PodStatusSource,
    /** Called with a fresh copy of the pod whenever the reported status changes. */
    private readonly notify: (pod: V1Pod) => void,
  ) {}

  snapshot(): V1Pod {
    return structuredClone({...this.src.pod, status: podStatus(this.src)})
  }

  publish(): void {
    if (this.src.closed || this.src.killingPod) return
    // Applying an exit reports it (a nested publish); this one then finds nothing new.
    this.src.seeDueExits()
    // Compared before it is copied: most publishes find the status unchanged, and the copy is of the whole pod.
    const status = podStatus(this.src)
    const text = JSON.stringify(status)
    if (text === this.lastNotified) return
    this.lastNotified = text
    this.notify(structuredClone({...this.src.pod, status}))
  }

  /** Whoever registers for notifications next gets the status, even if unchanged (a restored pod). */
  forget(): void {
    this.lastNotified = ''
  }

  /** A start shows at the relist that sees it: publish then (the earliest unseen start first). */
  publishWhenObserved(): void {
    const clock = this.src.clock
    clock.clearTimeout(this.observeTimer)
    this.observeTimer = undefined
    const pending = unseenStarts(this.src.containers, clock.now())
    if (pending.length === 0 || this.src.closed) return
    this.observeTimer = clock.setTimeout(
      () => {
        this.observeTimer = undefined
        this.publish()
        this.publishWhenObserved()
      },
      Math.max(0, Math.min(...pending) - clock.now()) + 1,
    )
  }

  close(): void {
    this.src.clock.clearTimeout(this.observeTimer)
  }
}
