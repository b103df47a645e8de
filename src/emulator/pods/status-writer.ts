import {type CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod, type V1PodStatus} from '@kubernetes/client-node'
import {describeApiError, isConflict, isNotFound} from '../kube/errors.js'
import type {MirrorTarget} from './mirror.js'
import {isTerminalPhase} from './status.js'
import {canBeDeleted, needsUpdate, type Entry} from './status-entry.js'
import {patchBody} from './status-patch.js'
import type {WriteTurns} from './write-turns.js'

const SmpOptions = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch)

/** What a write needs of the status manager that holds the entries (status-manager.ts). */
export interface StatusWriterHost {
  /** The manager runs and the entry is still the one it holds for its UID: a write that waited for its turn gives up otherwise. */
  current(e: Entry): boolean
  /** The status as it would be written now. */
  build(e: Entry): V1PodStatus
  /** The object the status goes to: the pod, or a static pod's mirror (undefined: none yet). */
  target(e: Entry): MirrorTarget | undefined
  /** A status PATCH went through (the entry already says so): `pod` is the API's answer. */
  written(e: Entry, pod: V1Pod, status: V1PodStatus): void
  /** A write failed, not because the pod is gone: the message says which and why; the entry's back-off says when again. */
  failed(e: Entry, message: string): void
}

/**
 * One pod's write (the kubelet status manager's syncPod): the status as it
 * is when its turn comes, a strategic merge patch of pods/<name>/status with
 * the pod's UID as precondition, then the final DELETE of a pod whose
 * worker is done with it (canBeDeleted). Each request takes a turn
 * (write-turns.ts) and a token of the client's rate limit first.
 */
export class StatusWriter {
  constructor(
    private readonly core: CoreV1Api,
    private readonly turns: WriteTurns,
    /** Waits for a token of the client's rate limit (status-manager.ts StatusManagerOptions.throttle). */
    private readonly throttle: (() => Promise<void>) | undefined,
    private readonly host: StatusWriterHost,
  ) {}

  async write(e: Entry): Promise<void> {
    const {name, namespace, uid} = e.pod.metadata!
    const target = this.host.target(e)
    // A static pod without a mirror: nothing to write to until one appears (retarget).
    if (!target) return
    // A new mirror (or a status someone else overwrote) gets the whole status, whatever it has now.
    const moved = e.writtenTo !== target.uid
    e.inconsistent = false
    // A pod that was finished before we saw it, or that we already finished, keeps its status.
    const done = !moved && (isTerminalPhase(e.written?.phase) || (!e.written && isTerminalPhase(e.pod.status?.phase) && e.terminal))
    let status = done ? undefined : this.host.build(e)
    if (status && needsUpdate(e, status, moved)) {
      const free = this.turns.now()
      const release = free ?? (await this.turns.next())
      try {
        if (!free || this.throttle) {
          await this.throttle?.()
          if (!this.host.current(e) || e.gone) return
          // Built again after waiting for its turn: whatever changed meanwhile goes in this one write.
          status = this.host.build(e)
        }
        if (needsUpdate(e, status, moved)) {
          const before = moved ? target.status : (e.written ?? e.pod.status)
          const pod = await this.core.patchNamespacedPodStatus({name: target.name, namespace: target.namespace, body: patchBody(target.uid, status, before)}, SmpOptions)
          e.written = status
          e.writtenTo = target.uid
          e.backoff.reset()
          this.host.written(e, pod, status)
        }
      } catch (error) {
        return this.failed(e, error, 'writing status')
      } finally {
        release()
      }
    }
    if (canBeDeleted(e)) {
      const release = await this.turns.next()
      try {
        await this.throttle?.()
        if (!this.host.current(e)) return
        await this.core.deleteNamespacedPod({name: name!, namespace: namespace!, gracePeriodSeconds: 0, body: {gracePeriodSeconds: 0, preconditions: {uid}}})
        e.deleted = true
      } catch (error) {
        return this.failed(e, error, 'deleting pod')
      } finally {
        release()
      }
    }
  }

  private failed(e: Entry, error: unknown, what: string): void {
    if (e.isStatic && (isNotFound(error) || isConflict(error))) {
      // The mirror was deleted or replaced: the next one is written when it appears (retarget).
      e.writtenTo = undefined
      return
    }
    if (isNotFound(error) || isConflict(error)) {
      // Gone, or the name now belongs to another pod (UID precondition): nothing of ours to write.
      e.gone = true
      return
    }
    this.host.failed(e, `${what} of pod ${e.pod.metadata?.namespace}/${e.pod.metadata?.name}: ${describeApiError(error)}`)
  }
}
