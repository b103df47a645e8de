import {EventReason} from '../../kube/event-reasons.js'
import {goDuration} from '../container/crash-loop.js'
import {containerLayerDir} from '../container/config.js'
import type {ContainerHost} from '../container/host.js'
import {startContainer} from '../container/start.js'
import {podDesc} from '../../../common/pods.js'
import type {ContainerState} from '../container/state.js'
import {containerLogDir} from '../logs/layout.js'
import {EvictedReason, EvictionGracePeriodSeconds, LocalStorageCheck} from './eviction.js'
import {computeInitAction, computePodActions, DeadlineExceededMessage, DeadlineExceededReason, podCompleted, startGate, type ObservedPod} from './pod-actions.js'
import type {PodOutcome} from './pod-status.js'
import {nextRelist, syncBackoffDelay} from './sync-clock.js'
import type {PodTermination} from './termination.js'

/** What a sync pass acts on: the pod runtime (pod-runtime.ts), seen from its sync steps. */
export interface SyncedPod extends ContainerHost {
  readonly end: PodTermination
  outcome: PodOutcome | undefined
  terminate(gracePeriodSeconds: number): Promise<void>
  /** A sync pass at `at` (epoch ms), unless one is due sooner. */
  wake(at: number): void
}

/**
 * SyncPod's steps for one pod (the kubelet's kuberuntime_manager.go SyncPod),
 * each deciding from computePodActions (pod-actions.ts) and then doing;
 * before them, what the sync before found (a back-off) becomes the status:
 *  1. decide: computePodActions, from the pod, the containers and the clock;
 *  2. past activeDeadlineSeconds: the pod fails with DeadlineExceeded and terminates;
 *  3. the sandbox (sandbox/pod-sandbox.ts): volumes, network, the pod's files; else retry later;
 *  4. local storage over a limit: the pod is evicted (eviction.ts);
 *  5. the init containers' step: start the next one, or wait for it; a failure under Never finishes the pod;
 *  6. start the sidecars, the regular and the ephemeral containers the actions name, each past its
 *     start gate (a config retry, CrashLoopBackOff: container/start.ts does the start);
 *  7. nothing runs or will restart: finish (termination.ts).
 * It also keeps the retry clock of what failed (a sandbox, a config, a start).
 */
export class PodSync {
  /** Every init container has completed (sidecars: started); set again by adoption. */
  initDone = false
  /** No retry of a failed setup or container config before this (epoch ms). */
  private configRetryAt = 0
  /** Syncs of this pod that failed so far (the first retry comes with the sandbox's relist, later ones on the back-off). */
  private failedSyncs = 0
  private readonly storage: LocalStorageCheck

  constructor(private readonly p: SyncedPod) {
    this.storage = new LocalStorageCheck(p.clock)
  }

  /** A sync pass: the steps above. */
  async syncOnce(): Promise<void> {
    const p = this.p
    if (p.end.finished) return
    for (const c of p.containers) c.syncBegins()
    const actions = computePodActions(p.pod, this.observed(), p.clock.now())
    if (actions.deadlineExceeded) return this.fail(DeadlineExceededReason, DeadlineExceededMessage, 'Normal', EventReason.DeadlineExceeded, p.podGraceMs() / 1000)
    if (Number.isFinite(actions.activeDeadlineAt)) p.wake(actions.activeDeadlineAt)
    if (!(await this.ensureSandbox())) return
    if (await this.checkLocalStorage()) return
    if (!(await this.runInitStep())) return
    // The init containers may have completed on this pass (a sidecar that started): the containers' step is decided now.
    const {containers} = actions.init.action === 'done' ? actions : computePodActions(p.pod, this.observed(), p.clock.now())
    for (const step of containers) {
      const c = step.container
      if (p.end.finished || c.running || c.stopping) continue
      if (step.action === 'settle') c.clearWaiting()
      else await this.maybeStart(c)
    }
    if (!p.end.finished && podCompleted(p.pod, this.observed())) await p.end.finish()
  }

  private observed(): ObservedPod {
    const p = this.p
    return {containers: p.containers, initDone: this.initDone, finished: p.end.finished, terminating: p.end.isTerminating, createdAt: p.createdAt}
  }

  /** Step 3: the retry of a sandbox that could not be set up waits for its time. */
  private async ensureSandbox(): Promise<boolean> {
    const p = this.p
    if (p.sandbox.ready) return true
    if (p.clock.now() < this.configRetryAt) return (p.wake(this.configRetryAt), false)
    const r = await p.sandbox.ensure()
    if (r.ready) {
      if (r.mounted) this.configRetryAt = 0
      return true
    }
    if ('retryAt' in r) this.retryAt(r.retryAt)
    else this.retrySyncLater()
    return false
  }

  /** Step 4: the eviction manager's local storage limits (eviction.ts). */
  private async checkLocalStorage(): Promise<boolean> {
    const p = this.p
    const m = p.pod.metadata!
    const logDir = (c: string) => containerLogDir(p.deps.ctx.stateDir, m.namespace!, m.name!, m.uid!, c)
    const message = await this.storage.check(
      p.pod,
      p.sandbox.volumes,
      logDir,
      (c) => containerLayerDir(p.sandbox.dir, c),
      (at) => p.wake(at),
    )
    if (!message || p.end.finished) return false
    this.fail(EvictedReason, message, 'Warning', EventReason.Evicted, EvictionGracePeriodSeconds)
    return true
  }

  /** Step 5: true once every init container has completed (sidecars: started). */
  private async runInitStep(): Promise<boolean> {
    const p = this.p
    for (;;) {
      if (p.end.finished) return false
      const init = computeInitAction(p.pod, this.observed())
      if (init.action === 'done') return (this.initDone = true)
      const c = init.container
      if (init.action === 'wait') return false
      if (init.action === 'fail') {
        c.clearWaiting()
        await p.end.finish()
        return false
      }
      await this.maybeStart(c)
      if (c.kind !== 'sidecar' || !c.running || !c.started) return false
      // The next one waits for the relist that sees the sidecar run (the kubelet's next sync comes with its
      // ContainerStarted event): a sidecar is never started with its successor in one sync.
      const now = p.clock.now()
      if (!c.observed(now)) return (p.wake(c.unobserved!.until + 1), false)
    }
  }

  /** Step 6: starts a container unless it waits for its config retry or is in CrashLoopBackOff. */
  private async maybeStart(c: ContainerState): Promise<void> {
    const p = this.p
    const now = p.clock.now()
    const gate = startGate(c, now, this.configRetryAt)
    if (gate.gate === 'retry') return p.wake(gate.at)
    if (gate.gate === 'backOff') {
      // Every sync that finds the container in back-off says so, and the pod is synced again
      // on the worker's back-off, not when the back-off ends (pod_workers.go).
      p.event(c, 'Warning', EventReason.BackOffStartContainer, `Back-off restarting failed container ${c.name} in pod ${podDesc(p.pod)}`)
      const waiting = {reason: 'CrashLoopBackOff', message: `back-off ${goDuration(c.backoff.currentMs)} restarting failed container=${c.name} pod=${podDesc(p.pod)}`}
      // The status shows it from the next sync, or at once (container/state.ts foundInBackOff).
      c.foundInBackOff(waiting)
      return p.wake(now + syncBackoffDelay(p.deps.sync))
    }
    if (gate.backOffFrom !== undefined) c.backoff.restarted(gate.backOffFrom, now)
    c.startAttempted()
    await startContainer(p, c)
  }

  /** The pod fails by the runtime's own decision (deadline, eviction) and terminates. */
  private fail(reason: string, message: string, type: 'Normal' | 'Warning', event: string, graceSeconds: number): void {
    this.p.outcome = {phase: 'Failed', reason, message}
    this.p.podEvent(type, event, message)
    void this.p.terminate(graceSeconds)
  }

  /** A sync that failed (a container's config, image or start): the next one comes on the pod worker's clock. */
  retrySyncLater(): void {
    const now = this.p.clock.now()
    this.retryAt(this.failedSyncs++ === 0 ? Math.max(nextRelist(now + 1, this.p.deps.sync), now + 1) : now + syncBackoffDelay(this.p.deps.sync))
  }

  /** No retry of a failed setup or config before at (epoch ms; 0: none, at once). */
  retryAt(at: number): void {
    this.configRetryAt = at
    if (at > 0) this.p.wake(at)
  }
}
