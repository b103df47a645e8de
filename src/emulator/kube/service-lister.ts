import {type CoreV1Api, type KubeConfig, ListWatch, type V1Service, Watch} from '@kubernetes/client-node'
import {Backoff, sleep} from './backoff.js'
import type {RequestCounter} from './client.js'

/** The watch is closed and resumed from its resourceVersion this often, like the pod watch. */
export const DefaultServiceWatchTimeoutSeconds = 300
export const DefaultServiceRetryInitialMs = 500
export const DefaultServiceRetryMaxMs = 10_000
/** How long a container start waits for the first listing before it fails (and is retried). */
export const DefaultServiceSyncWaitMs = 10_000

/** The Services a container's environment is built from (the kubelet's service lister). */
export interface ServiceLookup {
  /** Every Service of a namespace; waits for the first listing (bounded), then answers from memory. */
  list(namespace: string): Promise<readonly V1Service[]>
}

export class ServicesNotSynced extends Error {}

/**
 * One list+watch of every Service in the cluster, as the kubelet's service
 * informer: the service environment variables of a container cost no
 * request, however many pods start at once. Built on client-node's ListWatch
 * (which relists on 410 Gone); failures are retried with capped backoff.
 */
export class ServiceLister implements ServiceLookup {
  private readonly informer: ListWatch<V1Service>
  private stopped = false
  private listed = false
  private readonly waiters = new Set<() => void>()
  private readonly backoff = new Backoff(DefaultServiceRetryInitialMs, DefaultServiceRetryMaxMs)
  private readonly abort = new AbortController()
  private closeWatch: (() => void) | undefined

  constructor(
    private readonly core: CoreV1Api,
    kc: KubeConfig,
    private readonly counter?: RequestCounter,
    private readonly opts: {watchTimeoutSeconds?: number; syncWaitMs?: number} = {},
  ) {
    const watch = new Watch(kc)
    // A counted watch with a server timeout and bookmarks (ListWatch asks for neither).
    const counted = {
      watch: (path: string, params: Record<string, unknown>, cb: (type: string, obj: unknown, raw: unknown) => void, done: (err: unknown) => void) => {
        this.counter?.record('WATCH', path)
        this.closeWatch?.()
        const closed = this.counter?.watchOpened() ?? (() => undefined)
        this.closeWatch = closed
        const query = {...params, allowWatchBookmarks: true, timeoutSeconds: this.opts.watchTimeoutSeconds ?? DefaultServiceWatchTimeoutSeconds}
        return watch.watch(path, query, cb, (err: unknown) => {
          closed()
          done(err)
        })
      },
    } as unknown as Watch
    this.informer = new ListWatch<V1Service>('/api/v1/services', counted, () => this.list0(), false)
    this.informer.on('error', () => void this.retry())
  }

  private async list0() {
    const list = await this.core.listServiceForAllNamespaces()
    this.listed = true
    this.backoff.reset()
    for (const w of this.waiters) w()
    this.waiters.clear()
    return list
  }

  start(): void {
    void this.informer.start()
  }

  private async retry(): Promise<void> {
    if (this.stopped) return
    await sleep(this.backoff.next(), this.abort.signal)
    if (!this.stopped) void this.informer.start()
  }

  async list(namespace: string): Promise<readonly V1Service[]> {
    if (!this.listed) await this.synced()
    return this.informer.list(namespace)
  }

  private synced(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(done)
        reject(new ServicesNotSynced('services have not yet been read at least once'))
      }, this.opts.syncWaitMs ?? DefaultServiceSyncWaitMs)
      const done = () => {
        clearTimeout(timer)
        resolve()
      }
      this.waiters.add(done)
    })
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.abort.abort()
    await this.informer.stop()
    this.closeWatch?.()
    for (const w of this.waiters) w()
    this.waiters.clear()
  }
}
