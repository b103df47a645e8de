import type {CoreV1Api, KubeConfig, V1Pod} from '@kubernetes/client-node'
import {Watch} from '@kubernetes/client-node'
import {ObjectSerializer} from '@kubernetes/client-node/dist/serializer.js'
import {Backoff, sleep} from '../kube/backoff.js'
import {describeApiError} from '../kube/errors.js'
import type {RequestCounter} from '../kube/client.js'

/** A watch is closed and resumed from its resourceVersion this often (client-go's reflector uses 5-10 min). */
export const DefaultWatchTimeoutSeconds = 300
/** Reconnect backoff after a failed list or watch. */
export const DefaultSourceRetryInitialMs = 200
export const DefaultSourceRetryMaxMs = 10_000

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
  watchTimeoutSeconds?: number
  retryInitialMs?: number
  retryMaxMs?: number
}

class Gone extends Error {}

/**
 * The API source: list + watch of pods with fieldSelector
 * spec.nodeName=<node> in all namespaces. The watch resumes from the last
 * resourceVersion seen (bookmarks keep it fresh), relists on 410 Gone and
 * reconnects with backoff on any other failure.
 */
export class PodSource {
  private resourceVersion: string | undefined
  private watchAbort: AbortController | undefined
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
    const backoff = new Backoff(this.opts.retryInitialMs ?? DefaultSourceRetryInitialMs, this.opts.retryMaxMs ?? DefaultSourceRetryMaxMs)
    const stop = () => this.watchAbort?.abort()
    signal.addEventListener('abort', stop, {once: true})
    try {
      while (!signal.aborted) {
        try {
          if (this.resourceVersion === undefined) {
            await this.list()
            if (!this.listed) {
              this.listed = true
              onFirstList?.()
            }
          }
          await this.watch(signal)
          backoff.reset()
        } catch (error) {
          if (signal.aborted) break
          if (error instanceof Gone) {
            // Our resourceVersion is too old: start over from a fresh list.
            this.resourceVersion = undefined
            continue
          }
          this.handler.onError?.(`pod watch: ${describeApiError(error)}`)
          await sleep(backoff.next(), signal)
        }
      }
    } finally {
      signal.removeEventListener('abort', stop)
      this.watchAbort?.abort()
    }
  }

  private async list(): Promise<void> {
    const list = await this.opts.core.listPodForAllNamespaces({fieldSelector: this.fieldSelector})
    this.resourceVersion = list.metadata?.resourceVersion
    this.handler.onList(list.items)
  }

  /** One watch request, until the server closes it, it fails, or signal aborts. */
  private watch(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return resolve()
      let gone = false
      this.opts.counter?.record('WATCH')
      const closed = this.opts.counter?.watchOpened() ?? (() => undefined)
      const w = new Watch(this.opts.kc)
      w.watch(
        '/api/v1/pods',
        {
          fieldSelector: this.fieldSelector,
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: this.opts.watchTimeoutSeconds ?? DefaultWatchTimeoutSeconds,
        },
        (type: string, obj: unknown) => {
          if (gone || signal.aborted) return
          if (type === 'ERROR') {
            const status = obj as {code?: number; message?: string}
            if (status?.code === 410) {
              gone = true
              this.watchAbort?.abort()
              return
            }
            this.handler.onError?.(`pod watch: ${status?.message ?? 'error event'}`)
            return
          }
          const pod = ObjectSerializer.deserialize(obj, 'V1Pod') as V1Pod
          const rv = pod.metadata?.resourceVersion
          if (rv) this.resourceVersion = rv
          if (type === 'ADDED' || type === 'MODIFIED') this.handler.onUpsert(pod)
          else if (type === 'DELETED') this.handler.onDelete(pod)
          // BOOKMARK: only the resourceVersion moves.
        },
        (err: unknown) => {
          closed()
          this.watchAbort = undefined
          if (gone) return reject(new Gone('resourceVersion too old'))
          if (err && !signal.aborted && !isAbort(err)) {
            const code = (err as {statusCode?: number}).statusCode
            if (code === 410) return reject(new Gone('resourceVersion too old'))
            return reject(err)
          }
          resolve()
        },
      ).then(
        (controller) => {
          if (!controller) return
          this.watchAbort = controller
          if (signal.aborted || gone) controller.abort()
        },
        (error: unknown) => {
          closed()
          reject(error)
        },
      )
    })
  }
}

function isAbort(err: unknown): boolean {
  const e = err as {name?: string; type?: string}
  return e?.name === 'AbortError' || e?.type === 'aborted'
}
