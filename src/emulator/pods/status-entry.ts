import type {V1Pod, V1PodStatus} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'
import type {WakeTimer} from '../../common/wake-timer.js'
import type {Backoff} from '../kube/backoff.js'
import type {MirrorTarget} from './mirror.js'
import {isTerminalPhase, type StatusOverride} from './status.js'
import {needsReconcile} from './status-patch.js'

/** What the status manager holds for one pod UID. */
export interface Entry {
  uid: string
  /** The latest pod from the API. */
  pod: V1Pod
  reported?: V1PodStatus
  written?: V1PodStatus
  /** The UID of the object the last status went to (the pod itself, or a static pod's mirror). */
  writtenTo?: string
  /** A static pod: its status is written onto its mirror pod. */
  isStatic: boolean
  sandboxReady: boolean
  /**
   * A write no transition hold delays waits: a new generation (a spec change, a graceful delete), or the status a
   * worker decided from (writeNow: SyncPod writes the status it acts on before it acts).
   */
  unheld?: boolean
  /** The pod had its sandbox at some point (its IP stays, as the kubelet's pod IP outlives the sandbox's readiness). */
  hadSandbox: boolean
  /** The worker is terminated: no process of the pod runs (SyncTerminatedPod's status: kubelet podIsTerminal). */
  terminal: boolean
  /**
   * TerminatePod has run too: what never ran is reported lost and the phase is terminal. The kubelet does it after
   * the pod's volumes are gone, a write after the terminated sync's own, so a pod whose containers never ran shows
   * them waiting with its sandbox gone before it shows them lost.
   */
  final: boolean
  override?: StatusOverride
  /** When the next write is due (its deadline only moves earlier). */
  wake: WakeTimer
  firstDirtyAt?: number
  writing?: Promise<void>
  deleted: boolean
  gone: boolean
  backoff: Backoff
  /** The API's status differed from the written one at the last check. */
  inconsistent?: boolean
}

/** needsUpdate: the status goes to a new object (or over someone else's), or differs from the one written. */
export function needsUpdate(e: Entry, status: V1PodStatus, moved: boolean): boolean {
  return moved || !isDeepStrictEqual(status, e.written)
}

/** canBeDeleted: the worker is done with the pod (no process left, TerminatePod run), it is being deleted, and its terminal status is in the API. */
export function canBeDeleted(e: Entry): boolean {
  const phase = e.written?.phase ?? e.pod.status?.phase
  return e.final && !!e.pod.metadata?.deletionTimestamp && isTerminalPhase(phase) && !e.deleted
}

/** Nothing is pending or being written, and the last status written is not terminal (a terminal status is final: nothing is written after it, whoever changed it). */
export function settled(e: Entry): boolean {
  return !!e.written && !isTerminalPhase(e.written.phase) && !e.wake.armed && !e.writing && !e.gone
}

/**
 * One check of the periodic reconcile: the status the API holds on the object written to (target) is not the one
 * written (needsReconcile) on this check and the one before; one check is not enough, as the watch may not have
 * brought our own last write yet. Records this check's verdict on the entry.
 */
export function reconcileDue(e: Entry, target: MirrorTarget | undefined): boolean {
  const differs = !!target && target.uid === e.writtenTo && needsReconcile(target.status, e.written!)
  const due = differs && !!e.inconsistent
  e.inconsistent = differs
  return due
}
