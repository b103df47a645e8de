import type {CoreV1Event, V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {isTerminalPhase} from '../../common/pods.js'
import {ListFirst, runWatchLoop} from '../../emulator/kube/watch-loop.js'
import type {DevProgress, InstanceExit} from '../../kubectl/dev-report.js'
import {streamContainerLog} from '../logs-service.js'
import type {KubeSession} from '../session.js'

/** How the dev pod ended, when it ends by itself. */
export type DevPodEnd = {kind: 'exited'; exit: InstanceExit} | {kind: 'failed'; reason: string; message: string} | {kind: 'gone'}

/** What was last seen of the dev container, to tell what changed. */
export interface SeenContainer {
  containerID?: string
  restartCount: number
  waiting?: string
}

/** Warning events a line of dev already covers: CrashLoopBackOff is shown as the container's waiting reason. */
const CoveredWarnings = new Set(['BackOff'])

/** A log stream that ended while its instance still runs (a dropped connection) is opened again after this. */
export const LogReconnectDelayMs = 1_000
/** At the end, the last instance's log is waited for this long at most. */
export const LogDrainTimeoutMs = 5_000

function statusOf(pod: V1Pod, container: string): V1ContainerStatus | undefined {
  return pod.status?.containerStatuses?.find((c) => c.name === container)
}

function exitOf(t: {exitCode: number; signal?: number; reason?: string}): InstanceExit {
  return {exitCode: t.exitCode, ...(t.signal ? {signal: t.signal} : {}), ...(t.reason ? {reason: t.reason} : {})}
}

/**
 * What a new status of the dev pod says, against what was seen before:
 * a restart (restartCount went up; how the instance before ended), a new
 * instance running, a new waiting reason, and whether the pod ended for
 * good (its phase is terminal: the container's exit, or the node's reason
 * when no container ever ran) or is being deleted.
 */
export function podChanges(before: SeenContainer | undefined, pod: V1Pod, container: string): {progress: DevProgress[]; seen: SeenContainer; end?: DevPodEnd} {
  const s = statusOf(pod, container)
  const seen: SeenContainer = {containerID: s?.containerID || before?.containerID, restartCount: s?.restartCount ?? before?.restartCount ?? 0, waiting: s?.state?.waiting?.reason}
  const progress: DevProgress[] = []
  if (before && seen.restartCount > before.restartCount) {
    const last = s?.lastState?.terminated
    progress.push({kind: 'restarted', container, restartCount: seen.restartCount, ...(last ? {exit: exitOf(last)} : {})})
  }
  if (s?.state?.running && s.containerID && s.containerID !== before?.containerID) progress.push({kind: 'started', container, restartCount: seen.restartCount})
  const w = s?.state?.waiting
  if (w?.reason && w.reason !== before?.waiting) progress.push({kind: 'waiting', container, reason: w.reason, ...(w.message ? {message: w.message} : {})})
  // Someone else is deleting it (dev stops following before it deletes the pod itself): its exit then is the deletion's, not the program's.
  if (pod.metadata?.deletionTimestamp) return {progress, seen, end: {kind: 'gone'}}
  if (!isTerminalPhase(pod.status?.phase)) return {progress, seen}
  const t = s?.state?.terminated
  const end: DevPodEnd = t ? {kind: 'exited', exit: exitOf(t)} : {kind: 'failed', reason: pod.status?.reason ?? pod.status!.phase!, message: pod.status?.message ?? ''}
  return {progress, seen, end}
}

/**
 * Follows the dev pod through the API: its status (a watch, resumed when
 * the server ends it) turned into progress, and the dev container's log,
 * one follow per instance (the node ends a follow when its instance ends;
 * the next instance gets a new one, so no line is read twice).
 */
export class DevPodFollower {
  readonly ended: Promise<DevPodEnd>
  private resolveEnd!: (end: DevPodEnd) => void
  private readonly stop = new AbortController()
  private seen: SeenContainer | undefined
  private latest: V1Pod | undefined
  /** Restart requests not yet seen done: their files say why the next restart came. */
  private requestedFiles: string[] | undefined
  private readonly logs: InstanceLogs

  constructor(
    private readonly session: KubeSession,
    private readonly namespace: string,
    private readonly pod: string,
    private readonly container: string,
    private readonly emit: (p: DevProgress) => void,
  ) {
    this.ended = new Promise((resolve) => (this.resolveEnd = resolve))
    this.logs = new InstanceLogs(session, namespace, pod, container, (line) => emit({kind: 'log', line}), this.stop.signal)
  }

  start(): void {
    const path = `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/pods`
    const fieldSelector = `metadata.name=${this.pod}`
    const list = async () => {
      const l = await this.session.core.listNamespacedPod({namespace: this.namespace, fieldSelector})
      if (l.items.length === 0 && this.latest) this.finish({kind: 'gone'})
      for (const p of l.items) this.onPod(p)
      return l.metadata?.resourceVersion
    }
    const onEvent = (type: string, obj: unknown) => (type === 'DELETED' ? this.finish({kind: 'gone'}) : this.onPod(obj as V1Pod))
    void runWatchLoop({kc: this.session.kc, path, query: {fieldSelector}, from: ListFirst, list, onEvent}, this.stop.signal)
    this.watchWarnings()
  }

  /** The pod's Warning events, each once (a repeat of the same event counts up instead). */
  private watchWarnings(): void {
    const path = `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/events`
    const fieldSelector = `involvedObject.name=${this.pod},type=Warning`
    const seen = new Set<string>()
    const onEvent = (e: CoreV1Event) => {
      const key = `${e.metadata?.uid}/${e.count ?? 1}`
      if (seen.has(key) || !e.reason || CoveredWarnings.has(e.reason)) return
      seen.add(key)
      this.emit({kind: 'event', reason: e.reason, message: e.message ?? ''})
    }
    const list = async () => {
      const l = await this.session.core.listNamespacedEvent({namespace: this.namespace, fieldSelector})
      for (const e of l.items) onEvent(e)
      return l.metadata?.resourceVersion
    }
    const watched = (type: string, obj: unknown) => type !== 'DELETED' && onEvent(obj as CoreV1Event)
    void runWatchLoop({kc: this.session.kc, path, query: {fieldSelector}, from: ListFirst, list, onEvent: watched}, this.stop.signal)
  }

  /** The files of a restart dev asked for: the next restart seen is said to be theirs. */
  restartRequested(files: string[]): void {
    this.requestedFiles = [...(this.requestedFiles ?? []), ...files]
  }

  /** The last instance's log, read to its end (bounded: a node that does not answer does not hold dev). */
  async drainLogs(timeoutMs = LogDrainTimeoutMs): Promise<void> {
    if (this.latest) this.logs.follow(statusOf(this.latest, this.container))
    await this.logs.idle(timeoutMs)
  }

  close(): void {
    this.stop.abort()
  }

  private onPod(pod: V1Pod): void {
    if (this.stop.signal.aborted) return
    this.latest = pod
    const {progress, seen, end} = podChanges(this.seen, pod, this.container)
    this.seen = seen
    for (const p of progress) {
      if (p.kind === 'restarted' && this.requestedFiles) {
        this.emit({...p, files: this.requestedFiles})
        this.requestedFiles = undefined
      } else this.emit(p)
    }
    this.logs.follow(statusOf(pod, this.container))
    if (end) this.finish(end)
  }

  private finish(end: DevPodEnd): void {
    this.resolveEnd(end)
  }
}

/**
 * The instance whose log to read: the one running or just ended (followed
 * to its end), or, while the container waits to restart (CrashLoopBackOff),
 * the one before, which the log API serves as the previous instance.
 */
export function instanceToRead(status: V1ContainerStatus | undefined): {id: string; previous: boolean} | undefined {
  const state = status?.state
  if ((state?.running || state?.terminated) && status?.containerID) return {id: status.containerID, previous: false}
  const last = status?.lastState?.terminated?.containerID
  return state?.waiting && last ? {id: last, previous: true} : undefined
}

/** The dev container's log, one follow per instance, each line once. */
class InstanceLogs {
  /** Instances whose log was read to the end. */
  private readonly done = new Set<string>()
  /** Lines printed per instance: a follow opened again skips them. */
  private readonly printed = new Map<string, number>()
  private active: {id: string; finished: Promise<void>} | undefined
  private latest: V1ContainerStatus | undefined
  private retry: NodeJS.Timeout | undefined

  constructor(
    private readonly session: KubeSession,
    private readonly namespace: string,
    private readonly pod: string,
    private readonly container: string,
    private readonly onLine: (line: string) => void,
    private readonly signal: AbortSignal,
  ) {}

  /** A new status: the instance it shows is read, unless it is being or has been read to its end. */
  follow(status: V1ContainerStatus | undefined): void {
    if (status) this.latest = status
    const target = instanceToRead(this.latest)
    if (!target || this.done.has(target.id) || this.active || this.signal.aborted || this.retry) return
    this.active = {id: target.id, finished: this.read(target.id, target.previous)}
  }

  /** Resolves when no follow is open (or after timeoutMs). */
  async idle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.active && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([this.active.finished, new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))])
      // A pending timer would hold dev's exit for the rest of the bound.
      clearTimeout(timer)
    }
  }

  private async read(id: string, previous: boolean): Promise<void> {
    let skip = this.printed.get(id) ?? 0
    let failed = false
    try {
      await streamContainerLog(this.session, {namespace: this.namespace, pod: this.pod, container: this.container, follow: !previous, previous, signal: this.signal}, (line) => {
        if (skip > 0) return void skip--
        this.printed.set(id, (this.printed.get(id) ?? 0) + 1)
        this.onLine(line)
      })
    } catch {
      // The instance may not be readable yet (ContainerCreating) or the node did not answer: tried again below.
      failed = true
    }
    this.active = undefined
    // The node ends a follow when its instance ends: a follow that ended without an error read it all.
    if (!failed) this.done.add(id)
    if (this.signal.aborted) return
    if (this.done.has(id)) return this.follow(undefined)
    this.retry = setTimeout(() => {
      this.retry = undefined
      this.follow(undefined)
    }, LogReconnectDelayMs).unref()
  }
}
