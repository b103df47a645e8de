import {podKeyOf} from '../../common/pods.js'
import type {V1Pod} from '@kubernetes/client-node'
import {sleep} from '../kube/backoff.js'
import {PodWorker, type PodUpdate, type PodWorkState, type WorkerHost} from './pod-worker.js'
import type {StatusOverride} from './status.js'

/**
 * All pod workers, one per UID. Only the workers decide a pod's allowed
 * state; everything else asks them by UID. A pod that reuses the
 * namespace/name of one still terminating starts only once that one is done,
 * so two generations of a pod never run side by side.
 */
export class PodWorkers {
  private readonly workers = new Map<string, PodWorker>()
  /** Creates for a UID whose removed worker is still finishing: started once it is forgotten. */
  private readonly restarts = new Map<string, PodUpdate>()
  private readonly host: WorkerHost

  constructor(
    host: Omit<WorkerHost, 'forget'>,
    private readonly onForget: (uid: string) => void = () => undefined,
  ) {
    this.host = {...host, forget: (uid) => this.forget(uid)}
  }

  get size(): number {
    return this.workers.size
  }

  update(u: PodUpdate): void {
    const uid = u.pod.metadata?.uid
    if (!uid) return
    const w = this.workers.get(uid)
    if (w) {
      if (u.type === 'create' && w.removed) {
        this.restarts.set(uid, u)
        return
      }
      w.update(u)
      return
    }
    const name = podKeyOf(u.pod)
    const predecessor = [...this.workers.values()].find((x) => x.key === name && x.state !== 'terminated')
    this.workers.set(uid, new PodWorker(this.host, u, predecessor?.terminated))
  }

  private forget(uid: string): void {
    this.workers.delete(uid)
    this.onForget(uid)
    const restart = this.restarts.get(uid)
    if (restart) {
      this.restarts.delete(uid)
      this.update(restart)
    }
  }

  /** The provider reported a new status of this pod (its worker decides what it means). */
  reported(uid: string): void {
    this.workers.get(uid)?.reported()
  }

  state(uid: string): PodWorkState | undefined {
    return this.workers.get(uid)?.state
  }

  /** CouldHaveRunningContainers: false only once the worker is terminated (or unknown). */
  couldHaveRunningContainers(uid: string): boolean {
    const s = this.workers.get(uid)?.state
    return s === 'sync' || s === 'terminating'
  }

  inTransition(uid: string): boolean {
    return this.workers.get(uid)?.inTransition ?? false
  }

  /** The pods admitted and not yet terminated: what admission counts against the node. */
  active(): V1Pod[] {
    return [...this.workers.values()].filter((w) => w.state !== 'terminated').map((w) => w.pod)
  }

  /**
   * Node shutdown: kill every pod, each within min(its grace, graceSeconds),
   * reporting override; waits until all are terminated or timeoutMs passes.
   */
  async terminateAll(graceSeconds: number, override: StatusOverride | undefined, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const live = [...this.workers.values()].filter((w) => w.state !== 'terminated')
    for (const w of live) w.update({type: 'kill', pod: w.pod, gracePeriodOverride: shutdownGracePeriod(w.pod, graceSeconds), statusOverride: override})
    const all = Promise.all(
      live.map(async (w) => {
        await w.terminated
        await w.idle()
      }),
    ).then(() => true)
    const abort = new AbortController()
    signal?.addEventListener('abort', () => abort.abort(), {once: true})
    try {
      return await Promise.race([all, sleep(timeoutMs, abort.signal, this.host.clock).then(() => false)])
    } finally {
      abort.abort()
    }
  }

  /** Wait until no worker has work in hand (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.workers.values()].map((w) => w.idle()))
  }

  /** Stop every worker's timers; no more provider calls are made. */
  stop(): void {
    for (const w of this.workers.values()) w.stop()
    this.workers.clear()
    this.restarts.clear()
  }
}

/**
 * The node shutdown manager's grace for one pod: the node's shutdown grace,
 * or the pod's own terminationGracePeriodSeconds when that is shorter (a
 * pod that asks for 5 s is not given 30).
 */
export function shutdownGracePeriod(pod: V1Pod, graceSeconds: number): number {
  const own = pod.spec?.terminationGracePeriodSeconds
  return own !== undefined && own !== null && own <= graceSeconds ? own : graceSeconds
}
