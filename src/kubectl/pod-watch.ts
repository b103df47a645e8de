/**
 * A running `pods -w` watch as the pods service hands it to the ui: events of
 * the API's watch types, a stop, and a promise for its end.
 */
export type {WatchEventType} from '../emulator/kube/watch-loop.js'

export interface PodWatchHandle {
  stop(): void
  /** Settles when the watch ends for good (stop(), or an error it cannot recover from). */
  done: Promise<void>
}
