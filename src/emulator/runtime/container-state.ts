import type {V1Container, V1ContainerState, V1ContainerStatus, V1ObjectReference, V1Pod} from '@kubernetes/client-node'
import type {ContainerProcess} from './container-process.js'
import {CrashLoopBackoff, type CrashLoopTiming} from './crash-loop.js'
import type {ProbeWorker} from './probes.js'
import {StopDeadline} from './stop-deadline.js'

/** ephemeral: a `kubectl debug` container, added by a spec update, run once and never restarted. */
export type ContainerKind = 'init' | 'sidecar' | 'regular' | 'ephemeral'

/** One finished instance, newest first in ContainerState.history. */
export interface Termination {
  exitCode: number
  signal?: number
  reason: string
  message?: string
  startedAt?: Date
  finishedAt: Date
  containerID?: string
}

export interface Waiting {
  reason: string
  message?: string
}

/** The runtime's knowledge of one container of a pod, across its instances. */
export class ContainerState {
  proc: ContainerProcess | undefined
  containerID: string | undefined
  /** Instances started so far; restartCount is this minus one. */
  instances = 0
  /** When set, the container is not running and this says why it waits. */
  waiting: Waiting | undefined
  /** The waiting reason to show once the current instance is gone (PostStartHookError). */
  pendingWaiting: Waiting | undefined
  history: Termination[] = []
  started = false
  ready = false
  imageID = ''
  probes: ProbeWorker[] = []
  readonly backoff: CrashLoopBackoff
  /** When a stop is under way: its deadline (epoch ms; only moves closer) and completion. */
  readonly stopDeadline = new StopDeadline()
  stopping: Promise<void> | undefined
  /** Restart without backoff after the current instance exits (spec changed). */
  restartNow = false
  /** The image the running instance was started with. */
  runningImage: string | undefined
  logPath: string | undefined
  /** The mirrored terminationMessagePath of the current instance. */
  terminationMessageFile: string | undefined
  /**
   * The status as it was before the current instance started, shown until the
   * relist that sees the start (sync-clock.ts): an instance that ends before
   * then is never reported running, as on the kubelet.
   */
  unobserved: {until: number; status: V1ContainerStatus} | undefined

  constructor(
    public spec: V1Container,
    readonly kind: ContainerKind,
    timing: CrashLoopTiming,
  ) {
    this.backoff = new CrashLoopBackoff(timing)
  }

  get name(): string {
    return this.spec.name
  }

  get running(): boolean {
    return this.proc !== undefined
  }

  get everRan(): boolean {
    return this.instances > 0 || this.history.length > 0
  }

  get restartCount(): number {
    return Math.max(0, this.instances - 1)
  }

  get lastExit(): Termination | undefined {
    return this.history[0]
  }

  fieldPath(): string {
    if (this.kind === 'ephemeral') return `spec.ephemeralContainers{${this.name}}`
    return this.kind === 'regular' ? `spec.containers{${this.name}}` : `spec.initContainers{${this.name}}`
  }

  ref(pod: V1Pod): V1ObjectReference {
    return {...podRef(pod), fieldPath: this.fieldPath()}
  }

  pushTermination(t: Termination): void {
    this.history.unshift(t)
    this.history.length = Math.min(this.history.length, 2)
  }

  /** Whether the current instance's start has been seen (see unobserved). */
  observed(now = Date.now()): boolean {
    return !this.unobserved || now >= this.unobserved.until
  }

  status(defaultWaiting: string): V1ContainerStatus {
    if (this.proc && !this.observed()) return structuredClone(this.unobserved!.status)
    let state: V1ContainerState
    let last: Termination | undefined
    if (this.proc) {
      state = {running: {startedAt: this.proc.startedAt}}
      last = this.history[0]
    } else if (this.waiting || this.history.length === 0) {
      state = {waiting: {reason: this.waiting?.reason ?? defaultWaiting, ...(this.waiting?.message ? {message: this.waiting.message} : {})}}
      last = this.history[0]
    } else {
      state = {terminated: terminatedState(this.history[0])}
      last = this.history[1]
    }
    return {
      name: this.name,
      image: this.spec.image ?? '',
      imageID: this.imageID,
      ...(this.containerID ? {containerID: this.containerID} : {}),
      ready: this.ready,
      started: this.proc ? this.started : false,
      restartCount: this.restartCount,
      state,
      lastState: last ? {terminated: terminatedState(last)} : {},
    }
  }
}

function terminatedState(t: Termination): NonNullable<V1ContainerState['terminated']> {
  return {
    exitCode: t.exitCode,
    // No CRI reports the signal: the kubelet leaves `signal` unset and says it in exitCode (128 + n).
    reason: t.reason,
    ...(t.message ? {message: t.message} : {}),
    ...(t.startedAt ? {startedAt: t.startedAt} : {}),
    finishedAt: t.finishedAt,
    ...(t.containerID ? {containerID: t.containerID} : {}),
  }
}

export function podRef(pod: V1Pod): V1ObjectReference {
  return {kind: 'Pod', apiVersion: 'v1', namespace: pod.metadata?.namespace, name: pod.metadata?.name, uid: pod.metadata?.uid}
}

/** `name_namespace(uid)`, as the kubelet names a pod in messages. */
export function podDesc(pod: V1Pod): string {
  return `${pod.metadata?.name}_${pod.metadata?.namespace}(${pod.metadata?.uid})`
}
