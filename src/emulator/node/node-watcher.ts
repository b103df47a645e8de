import type {CoreV1Api, KubeConfig, V1Node} from '@kubernetes/client-node'
import type {RequestCounter} from '../kube/client.js'
import {DefaultWatchTimeoutSeconds, runWatchLoop} from '../kube/watch-loop.js'

/** Server-side watch timeout; the watch is renewed from the last resourceVersion. */
export const DefaultNodeWatchTimeoutSeconds = DefaultWatchTimeoutSeconds
/** The kubelet's backoff for its node's requests: 200 ms to 7 s. */
export const DefaultNodeWatchRetryInitialMs = 200
export const DefaultNodeWatchRetryMaxMs = 7_000

export interface NodeWatchHandlers {
  /** The node as the API server has it now (after anyone's change, ours included). */
  modified: (node: V1Node) => void
  deleted: () => void
}

export interface NodeWatcherOptions {
  kc: KubeConfig
  /** Relists the node when the watch's resourceVersion expired. */
  core: CoreV1Api
  name: string
  counter: RequestCounter
  timeoutSeconds?: number
}

/**
 * Watches our own Node object: one long-running request instead of a GET
 * every status interval. It is how vnode learns, at no polling cost, that the
 * node was deleted out of band or that someone (the node lifecycle controller)
 * overwrote a condition it owns.
 */
export class NodeWatcher {
  constructor(
    private readonly opts: NodeWatcherOptions,
    private readonly handlers: NodeWatchHandlers,
  ) {}

  async run(signal: AbortSignal): Promise<void> {
    const fieldSelector = `metadata.name=${this.opts.name}`
    await runWatchLoop(
      {
        kc: this.opts.kc,
        path: '/api/v1/nodes',
        query: {fieldSelector},
        // Started without a version, the watch's first event is the node as it is: no list at start-up,
        // so the start costs one request.
        from: undefined,
        // After 410 Gone: the node as it is now, or its absence (deleted while we were not watching).
        list: async () => {
          const list = await this.opts.core.listNode({fieldSelector})
          const node = list.items.find((n) => n.metadata?.name === this.opts.name)
          if (node) this.handlers.modified(node)
          else this.handlers.deleted()
          return list.metadata?.resourceVersion
        },
        onEvent: (type, obj) => {
          if (type === 'DELETED') this.handlers.deleted()
          else this.handlers.modified(obj as V1Node)
        },
        counter: this.opts.counter,
        timeoutSeconds: this.opts.timeoutSeconds ?? DefaultNodeWatchTimeoutSeconds,
        retryInitialMs: DefaultNodeWatchRetryInitialMs,
        retryMaxMs: DefaultNodeWatchRetryMaxMs,
      },
      signal,
    )
  }
}
