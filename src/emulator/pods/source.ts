import type {CoreV1Api, KubeConfig, V1Pod} from '@kubernetes/client-node'
import {ObjectSerializer} from '@kubernetes/client-node/dist/serializer.js'
import {describeApiError} from '../kube/errors.js'
import type {RequestCounter} from '../kube/client.js'
import {ListFirst, runWatchLoop} from '../kube/watch-loop.js'

export interface PodSourceHandler {
  /** A complete listing of the node's pods (first list, or a relist after 410 Gone). */
  onList(pods: V1Pod[]): void
  onUpsert(pod: V1Pod): void
  onDelete(pod: V1Pod): void
  onError?(message: string): void
}

export interface PodSourceOptions {
  core: CoreV1Api
  kc: KubeConfig
  nodeName: string
  counter?: RequestCounter
  /** Defaults of the watch loop (src/emulator/kube/watch-loop.ts) when unset. */
  watchTimeoutSeconds?: number
  retryInitialMs?: number
  retryMaxMs?: number
}

/**
 * The API source: list + watch of pods with fieldSelector
 * spec.nodeName=<node> in all namespaces. The watch resumes from the last
 * resourceVersion seen (bookmarks keep it fresh), relists on 410 Gone and
 * reconnects with backoff on any other failure.
 */
export class PodSource {
  private listed = false
  private readonly fieldSelector: string

  constructor(
    private readonly opts: PodSourceOptions,
    private readonly handler: PodSourceHandler,
  ) {
    this.fieldSelector = `spec.nodeName=${opts.nodeName}`
  }

  /** Has completed at least one list. */
  get synced(): boolean {
    return this.listed
  }

  /** Run until signal aborts. Resolves once stopped. */
  async run(signal: AbortSignal, onFirstList?: () => void): Promise<void> {
    await runWatchLoop(
      {
        kc: this.opts.kc,
        path: '/api/v1/pods',
        query: {fieldSelector: this.fieldSelector},
        from: ListFirst,
        list: async () => {
          const list = await this.opts.core.listPodForAllNamespaces({fieldSelector: this.fieldSelector})
          this.handler.onList(list.items)
          if (!this.listed) {
            this.listed = true
            onFirstList?.()
          }
          return list.metadata?.resourceVersion
        },
        onEvent: (type, obj) => {
          const pod = ObjectSerializer.deserialize(obj, 'V1Pod') as V1Pod
          if (type === 'DELETED') this.handler.onDelete(pod)
          else this.handler.onUpsert(pod)
        },
        onError: (error) => this.handler.onError?.(`pod watch: ${describeApiError(error)}`),
        counter: this.opts.counter,
        timeoutSeconds: this.opts.watchTimeoutSeconds,
        retryInitialMs: this.opts.retryInitialMs,
        retryMaxMs: this.opts.retryMaxMs,
      },
      signal,
    )
  }
}
