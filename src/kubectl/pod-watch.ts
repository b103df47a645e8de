import type {V1Pod} from '@kubernetes/client-node'

/** The API's watch event types, as the pods service reports them (the ui never watches itself). */
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED'

/** Starts the watch: each event to onEvent, until the handle is stopped. */
export type StartWatch = (onEvent: (type: WatchEventType, pod: V1Pod) => void) => PodWatchHandle

/**
 * A running `pods -w` watch as the pods service hands it to the ui: events of
 * the API's watch types, a stop, and a promise for its end.
 */
export interface PodWatchHandle {
  stop(): void
  /** Settles when the watch ends for good (stop(), or an error it cannot recover from). */
  done: Promise<void>
}
