import type {CoreV1Api, CoreV1Event, V1ObjectReference} from '@kubernetes/client-node'
import {randomBytes} from 'node:crypto'
import {InFlightLimit} from '../../common/in-flight-limit.js'

export type EventType = 'Normal' | 'Warning'

export interface RecordedEvent {
  type: EventType
  reason: string
  message: string
  object: V1ObjectReference
  count: number
  time: Date
}

/** How many distinct events are remembered for deduplication; older ones are forgotten. */
export const DefaultEventCacheSize = 1024
/**
 * Event writes in flight at once. Without a bound, a burst of pod starts sent
 * its hundred Created and Started events together, and each found no idle
 * connection: about 80 new TLS connections per 100-pod burst, a handshake each
 * on vnode's loop and on the API server, in the window where the pods' own
 * work runs. With 4 (nearer the kubelet's broadcaster, which writes one at a
 * time), a delete burst's Killing events trickled into the window of its
 * status writes and deletions: its p99 was 5042 against 4601 ms with 16 (A/B,
 * default node, 6 rounds of 100 pods).
 */
export const DefaultEventWritesInFlight = 16

/**
 * One recorder per node: source component "vnode" and host = node name, as the
 * kubelet's recorder does. A repeat of the same event (object, type, reason,
 * message) bumps count and lastTimestamp instead of creating a new object.
 * Recording never throws and never blocks the caller.
 */
export class EventRecorder {
  private readonly seen = new Map<string, {name: string; namespace: string; count: number}>()
  private readonly listeners = new Set<(e: RecordedEvent) => void>()
  private readonly inFlight = new Set<Promise<void>>()
  /** The last write about each object: its events reach the API server in the order they happened, as the kubelet's queue writes them. */
  private readonly tails = new Map<string, Promise<void>>()
  private readonly slots: InFlightLimit

  constructor(
    private readonly core: CoreV1Api,
    private readonly host: string,
    private readonly component = 'vnode',
    private readonly cacheSize = DefaultEventCacheSize,
    writesInFlight = DefaultEventWritesInFlight,
  ) {
    this.slots = new InFlightLimit(writesInFlight)
  }

  onEvent(listener: (e: RecordedEvent) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Fire and forget; the returned promise is for tests and shutdown. */
  record(object: V1ObjectReference, type: EventType, reason: string, message: string): Promise<void> {
    const chain = object.uid ?? `${object.namespace}/${object.name}`
    const before = this.tails.get(chain) ?? Promise.resolve()
    const p = before.then(() => this.write(object, type, reason, message)).catch(() => undefined)
    this.tails.set(chain, p)
    this.inFlight.add(p)
    void p.finally(() => {
      this.inFlight.delete(p)
      if (this.tails.get(chain) === p) this.tails.delete(chain)
    })
    return p
  }

  /** Waits for the events recorded so far to be written (or to fail). */
  async flush(): Promise<void> {
    await Promise.all([...this.inFlight])
  }

  private async write(object: V1ObjectReference, type: EventType, reason: string, message: string): Promise<void> {
    const now = new Date()
    // The kubelet's correlator tells containers apart by fieldPath: eight containers' Pulled are eight events.
    const key = `${object.uid ?? object.name}\u0000${object.fieldPath ?? ''}\u0000${type}\u0000${reason}\u0000${message}`
    const prev = this.seen.get(key)
    const count = (prev?.count ?? 0) + 1
    for (const l of this.listeners) l({type, reason, message, object, count, time: now})
    // A slot before the request, not before the record: the event's time and its listeners stay the moment it happened.
    const release = await this.slots.acquire()
    try {
      if (prev) {
        this.touch(key, {...prev, count})
        try {
          await this.core.patchNamespacedEvent({
            name: prev.name,
            namespace: prev.namespace,
            body: [
              {op: 'replace', path: '/count', value: count},
              {op: 'replace', path: '/lastTimestamp', value: now.toISOString()},
            ],
          })
          return
        } catch {
          // The event expired (events have a TTL): create a fresh one below.
        }
      }
      const namespace = object.namespace || 'default'
      const name = `${object.name}.${Date.now().toString(16)}${randomBytes(2).toString('hex')}`
      const body: CoreV1Event = {
        metadata: {name, namespace},
        involvedObject: object,
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: {component: this.component, host: this.host},
        reportingComponent: this.component,
        reportingInstance: this.host,
      }
      await this.core.createNamespacedEvent({namespace, body})
      this.touch(key, {name, namespace, count: 1})
    } finally {
      release()
    }
  }

  private touch(key: string, value: {name: string; namespace: string; count: number}): void {
    this.seen.delete(key)
    this.seen.set(key, value)
    while (this.seen.size > this.cacheSize) this.seen.delete(this.seen.keys().next().value as string)
  }

  /** Forgets events about one object (when it is gone), keeping the cache bounded by what exists. */
  forget(uid: string): void {
    for (const k of this.seen.keys()) if (k.startsWith(`${uid}\u0000`)) this.seen.delete(k)
  }

  get size(): number {
    return this.seen.size
  }
}
