import type {CoreV1Api, KubeConfig, V1Service} from '@kubernetes/client-node'
import type {RequestCounter} from './client.js'
import {ListFirst, runWatchLoop} from './watch-loop.js'

/** How long a container start waits for the first listing before it fails (and is retried). */
export const DefaultServiceSyncWaitMs = 10_000

/** The Services a container's environment is built from (the kubelet's service lister). */
export interface ServiceLookup {
  /** Every Service of a namespace; waits for the first listing (bounded), then answers from memory. */
  list(namespace: string): Promise<readonly V1Service[]>
}

export class ServicesNotSynced extends Error {}

const keyOf = (s: V1Service) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`

/**
 * One list+watch of every Service in the cluster, as the kubelet's service
 * informer: the service environment variables of a container cost no
 * request, however many pods start at once. Runs on the shared watch loop
 * (resume, relist on 410 Gone, capped backoff).
 */
export class ServiceLister implements ServiceLookup {
  /** namespace -> name -> Service */
  private readonly byNamespace = new Map<string, Map<string, V1Service>>()
  private listed = false
  private readonly waiters = new Set<() => void>()
  private readonly abort = new AbortController()
  private loop: Promise<void> | undefined

  constructor(
    private readonly core: CoreV1Api,
    private readonly kc: KubeConfig,
    private readonly counter?: RequestCounter,
    private readonly opts: {syncWaitMs?: number} = {},
  ) {}

  start(): void {
    this.loop ??= runWatchLoop(
      {
        kc: this.kc,
        path: '/api/v1/services',
        from: ListFirst,
        list: async () => {
          const list = await this.core.listServiceForAllNamespaces()
          this.replace(list.items)
          return list.metadata?.resourceVersion
        },
        onEvent: (type, obj) => {
          const s = obj as V1Service
          if (type === 'DELETED') this.byNamespace.get(s.metadata?.namespace ?? '')?.delete(s.metadata?.name ?? '')
          else this.put(s)
        },
        counter: this.counter,
      },
      this.abort.signal,
    )
  }

  private put(s: V1Service): void {
    const ns = s.metadata?.namespace ?? ''
    let names = this.byNamespace.get(ns)
    if (!names) this.byNamespace.set(ns, (names = new Map()))
    names.set(s.metadata?.name ?? '', s)
  }

  private replace(items: V1Service[]): void {
    const keep = new Set(items.map(keyOf))
    for (const [ns, names] of this.byNamespace) {
      for (const name of names.keys()) if (!keep.has(`${ns}/${name}`)) names.delete(name)
      if (names.size === 0) this.byNamespace.delete(ns)
    }
    for (const s of items) this.put(s)
    this.listed = true
    for (const w of this.waiters) w()
    this.waiters.clear()
  }

  async list(namespace: string): Promise<readonly V1Service[]> {
    if (!this.listed) await this.synced()
    return [...(this.byNamespace.get(namespace)?.values() ?? [])]
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
    this.abort.abort()
    await this.loop
    for (const w of this.waiters) w()
    this.waiters.clear()
    this.byNamespace.clear()
  }
}
