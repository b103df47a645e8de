import type {Clock} from '../../../common/clock.js'
import {SerialRunner} from '../../../common/serial-runner.js'
import {WakeTimer} from '../../../common/wake-timer.js'
import type {V1Pod} from '@kubernetes/client-node'
import type {ReferencedObjects} from '../../kube/object-manager.js'
import {isRefreshable, refreshVolumes, type VolumeDeps} from './volumes.js'

/**
 * Every volume of a pod is set up again this often (the kubelet's sync
 * period, 1 min): what a change notification missed, and projected
 * service account tokens, which are rotated once 80% of their lifetime has
 * passed (the shortest the API allows is 10 min).
 */
export const DefaultVolumeResyncMs = 60_000
/** A change is written this long after it is seen: changes that come together are written once. */
export const DefaultVolumeChangeDelayMs = 200

export interface VolumeRefreshOptions {
  resyncMs?: number
  changeDelayMs?: number
}

export interface VolumeRefreshDeps {
  /** The pod as it is now (labels and annotations for the downward API). */
  pod(): V1Pod
  sandbox: string
  volumes: VolumeDeps
  objects: ReferencedObjects
  /** A volume could not be set up again: its last content stays (FailedMount). */
  failed(message: string): void
  /** The runtime's clock: the resync and the change delay run on it. */
  clock: Clock
}

/**
 * Keeps one pod's ConfigMap, Secret, downwardAPI and projected volumes in
 * step with their sources, as the kubelet's volume manager remounts them:
 * at once (after a short coalescing delay) when a referenced object or the
 * pod's metadata changes, and every resync period. Writes are atomic
 * (atomic-writer.ts); subPath mounts and env are never touched.
 */
export class VolumeRefresher {
  private enabled = false
  private released = false
  private readonly timer: WakeTimer
  /** One refresh at a time; a request during one runs once more after it. */
  private readonly refresher = new SerialRunner(() => this.refreshOnce(), {
    active: () => !this.released,
    idle: () => this.schedule(this.deps.clock.now() + (this.opts.resyncMs ?? DefaultVolumeResyncMs)),
  })

  constructor(
    private readonly deps: VolumeRefreshDeps,
    private readonly opts: VolumeRefreshOptions = {},
  ) {
    this.timer = new WakeTimer(() => void this.refresher.run(), {clock: deps.clock})
  }

  private get refreshable(): boolean {
    return (this.deps.pod().spec?.volumes ?? []).some(isRefreshable)
  }

  /** The pod references what its spec names now; a change of one of them is written soon. */
  track(pod: V1Pod): void {
    if (this.released) return
    this.deps.objects.register(pod, () => this.soon())
  }

  /** The volumes were set up once: from now on they are kept up to date. */
  enable(): void {
    if (this.released || this.enabled) return
    this.enabled = true
    this.schedule(this.deps.clock.now() + (this.opts.resyncMs ?? DefaultVolumeResyncMs))
  }

  /** The pod's labels or annotations may have changed (the downward API). */
  podChanged(): void {
    if (this.deps.pod().spec?.volumes?.some((v) => v.downwardAPI || v.projected?.sources?.some((s) => s.downwardAPI))) this.soon()
  }

  private soon(): void {
    this.schedule(this.deps.clock.now() + (this.opts.changeDelayMs ?? DefaultVolumeChangeDelayMs))
  }

  private schedule(at: number): void {
    if (!this.enabled || this.released || !this.refreshable) return
    this.timer.wakeBy(at)
  }

  private async refreshOnce(): Promise<void> {
    const failures = await refreshVolumes(this.deps.pod(), this.deps.sandbox, this.deps.volumes).catch((e: unknown) => [String((e as Error).message)])
    if (!this.released) for (const f of failures) this.deps.failed(f)
  }

  /**
   * The pod's processes are gone: nothing is written any more (a write in
   * progress is awaited, so the volumes can be removed after this), the
   * objects are unregistered and the pod's tokens dropped. Idempotent.
   */
  async release(): Promise<void> {
    this.released = true
    this.timer.cancel()
    const uid = this.deps.pod().metadata?.uid
    if (uid) {
      this.deps.objects.unregister(uid)
      this.deps.volumes.tokens.forget(uid)
    }
    await this.refresher.running
  }
}
