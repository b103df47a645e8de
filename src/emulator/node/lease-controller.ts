import {type CoordinationV1Api, type V1Lease, V1MicroTime} from '@kubernetes/client-node'
import {Backoff, sleep} from '../kube/backoff.js'
import {isConflict, isNotFound, describeApiError} from '../kube/errors.js'

export const DefaultLeaseDurationSeconds = 40
/** leaseDuration x 0.25, as the kubelet renews. */
export const DefaultLeaseRenewIntervalMs = 10_000
export const DefaultLeaseRetryInitialMs = 200
export const DefaultLeaseRetryMaxMs = 7_000
export const NodeLeaseNamespace = 'kube-node-lease'

export interface LeaseOwner {
  name: string
  uid: string
}

export interface LeaseControllerOptions {
  durationSeconds?: number
  renewIntervalMs?: number
  /** Called when renewal finds the lease gone, which follows the Node's deletion (garbage collection). */
  onLeaseLost?: () => Promise<LeaseOwner | undefined>
  onRenew?: (at: Date) => void
  onError?: (message: string) => void
}

/**
 * Keeps the node's Lease in kube-node-lease renewed. The latest lease is kept
 * so a renewal is one PUT (the kubelet's way), not a GET and a PUT.
 */
export class LeaseController {
  private lease: V1Lease | undefined
  private readonly backoff = new Backoff(DefaultLeaseRetryInitialMs, DefaultLeaseRetryMaxMs)
  readonly durationSeconds: number
  readonly renewIntervalMs: number

  constructor(
    private readonly api: CoordinationV1Api,
    private owner: LeaseOwner,
    private readonly opts: LeaseControllerOptions = {},
  ) {
    this.durationSeconds = opts.durationSeconds ?? DefaultLeaseDurationSeconds
    this.renewIntervalMs = opts.renewIntervalMs ?? DefaultLeaseRenewIntervalMs
  }

  setOwner(owner: LeaseOwner): void {
    if (owner.uid !== this.owner.uid) this.lease = undefined
    this.owner = owner
  }

  private desired(): V1Lease {
    return {
      metadata: {
        name: this.owner.name,
        namespace: NodeLeaseNamespace,
        ownerReferences: [{apiVersion: 'v1', kind: 'Node', name: this.owner.name, uid: this.owner.uid}],
      },
      spec: {
        holderIdentity: this.owner.name,
        leaseDurationSeconds: this.durationSeconds,
        renewTime: new V1MicroTime(),
      },
    }
  }

  /** One renewal: update the cached lease, or find/create it. Throws on failure. */
  async renewOnce(): Promise<V1MicroTime> {
    const now = new V1MicroTime()
    if (this.lease) {
      const body: V1Lease = {...this.lease, spec: {...this.lease.spec, holderIdentity: this.owner.name, leaseDurationSeconds: this.durationSeconds, renewTime: now}}
      try {
        this.lease = await this.api.replaceNamespacedLease({name: this.owner.name, namespace: NodeLeaseNamespace, body})
        return now
      } catch (error) {
        this.lease = undefined
        if (isNotFound(error) && this.opts.onLeaseLost) {
          const owner = await this.opts.onLeaseLost()
          if (owner) this.setOwner(owner)
        }
        if (!isConflict(error) && !isNotFound(error)) throw error
      }
    }
    try {
      const existing = await this.api.readNamespacedLease({name: this.owner.name, namespace: NodeLeaseNamespace})
      const body: V1Lease = {
        ...existing,
        metadata: {...existing.metadata, ownerReferences: this.desired().metadata!.ownerReferences},
        spec: {...existing.spec, holderIdentity: this.owner.name, leaseDurationSeconds: this.durationSeconds, renewTime: now},
      }
      this.lease = await this.api.replaceNamespacedLease({name: this.owner.name, namespace: NodeLeaseNamespace, body})
    } catch (error) {
      if (!isNotFound(error)) throw error
      this.lease = await this.api.createNamespacedLease({namespace: NodeLeaseNamespace, body: this.desired()})
    }
    return now
  }

  /**
   * Renews every renewIntervalMs until signal aborts; failures retry with
   * backoff 200 ms to 7 s. With renewedAt (a renewal just made), the first
   * renewal waits one interval.
   */
  async run(signal: AbortSignal, renewedAt?: Date): Promise<void> {
    if (renewedAt) await sleep(this.renewIntervalMs, signal)
    while (!signal.aborted) {
      try {
        const at = await this.renewOnce()
        this.backoff.reset()
        this.opts.onRenew?.(at)
        await sleep(this.renewIntervalMs, signal)
      } catch (error) {
        this.opts.onError?.(`lease renewal failed: ${describeApiError(error)}`)
        await sleep(this.backoff.next(), signal)
      }
    }
  }

  async delete(): Promise<void> {
    try {
      await this.api.deleteNamespacedLease({name: this.owner.name, namespace: NodeLeaseNamespace})
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
    this.lease = undefined
  }
}
