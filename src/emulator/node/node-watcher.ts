import {type KubeConfig, type V1Node, Watch} from '@kubernetes/client-node'
import {Backoff, sleep} from '../kube/backoff.js'
import type {RequestCounter} from '../kube/client.js'

/** Server-side watch timeout; the watch is renewed from the last resourceVersion. */
export const DefaultNodeWatchTimeoutSeconds = 300
export const DefaultNodeWatchRetryInitialMs = 200
export const DefaultNodeWatchRetryMaxMs = 7_000

export interface NodeWatchHandlers {
  /** The node as the API server has it now (after anyone's change, ours included). */
  modified: (node: V1Node) => void
  deleted: () => void
}

/**
 * Watches our own Node object: one long-running request instead of a GET
 * every status interval. It is how vnode learns, at no polling cost, that the
 * node was deleted out of band or that someone (the node lifecycle controller)
 * overwrote a condition it owns.
 */
export class NodeWatcher {
  private resourceVersion: string | undefined

  constructor(
    private readonly kc: KubeConfig,
    private readonly name: string,
    private readonly counter: RequestCounter,
    private readonly handlers: NodeWatchHandlers,
    private readonly timeoutSeconds = DefaultNodeWatchTimeoutSeconds,
  ) {}

  async run(signal: AbortSignal): Promise<void> {
    const watch = new Watch(this.kc)
    const backoff = new Backoff(DefaultNodeWatchRetryInitialMs, DefaultNodeWatchRetryMaxMs)
    while (!signal.aborted) {
      const error = await this.watchOnce(watch, signal)
      if (signal.aborted) return
      if (error) await sleep(backoff.next(), signal)
      else backoff.reset()
    }
  }

  /** One watch request; resolves when the server closes it (undefined) or it fails (the error). */
  private watchOnce(watch: Watch, signal: AbortSignal): Promise<unknown> {
    return new Promise((resolve) => {
      let abort: AbortController | undefined
      const onAbort = () => abort?.abort()
      signal.addEventListener('abort', onAbort, {once: true})
      this.counter.record('WATCH', '/api/v1/nodes')
      const closed = this.counter.watchOpened()
      const finish = (err: unknown) => {
        closed()
        signal.removeEventListener('abort', onAbort)
        resolve(err ?? undefined)
      }
      watch
        .watch(
          '/api/v1/nodes',
          {
            fieldSelector: `metadata.name=${this.name}`,
            allowWatchBookmarks: true,
            timeoutSeconds: this.timeoutSeconds,
            resourceVersion: this.resourceVersion,
          },
          (type: string, obj: V1Node & {code?: number}) => this.onEvent(type, obj),
          finish,
        )
        .then(
          (ac) => {
            abort = ac
            if (signal.aborted) ac.abort()
          },
          finish,
        )
    })
  }

  private onEvent(type: string, obj: V1Node & {code?: number}): void {
    if (type === 'ERROR') {
      // 410 Gone: our resourceVersion is too old; start again from the current state.
      this.resourceVersion = undefined
      return
    }
    const rv = obj.metadata?.resourceVersion
    if (rv) this.resourceVersion = rv
    if (type === 'ADDED' || type === 'MODIFIED') this.handlers.modified(obj)
    else if (type === 'DELETED') this.handlers.deleted()
  }
}
