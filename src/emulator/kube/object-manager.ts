import {allContainersWithEphemeral} from '../../common/pods.js'
import type {CoreV1Api, KubeConfig, V1ConfigMap, V1Pod, V1Secret} from '@kubernetes/client-node'
import type {RequestCounter} from './client.js'
import {ListFirst, runWatchLoop} from './watch-loop.js'

/** How long a read waits for an object's first listing before it fails (and the start is retried), as the kubelet's cache sync wait. */
export const DefaultObjectSyncWaitMs = 10_000

export type ObjectKind = 'ConfigMap' | 'Secret'
export type ReferencedObject<K extends ObjectKind> = K extends 'ConfigMap' ? V1ConfigMap : V1Secret

export interface ObjectRef {
  kind: ObjectKind
  namespace: string
  name: string
}

/** What env building and volume materialisation read ConfigMaps and Secrets through. */
export interface ObjectLookup {
  /**
   * The object as last seen by its watch, or null when it does not exist.
   * Waits (bounded) for the first listing. Only objects a registered pod
   * references can be read, as with the kubelet's managers.
   */
  get<K extends ObjectKind>(kind: K, namespace: string, name: string): Promise<ReferencedObject<K> | null>
}

/** The kubelet's watch-based ConfigMap and Secret managers, as one. */
export interface ReferencedObjects extends ObjectLookup {
  /**
   * The pod references what its spec names (replacing what it referenced
   * before); onChange is called whenever one of those objects changes.
   */
  register(pod: V1Pod, onChange?: (ref: ObjectRef) => void): void
  /** The pod is gone: objects no other pod references stop being watched. */
  unregister(uid: string): void
}

export class ObjectNotSynced extends Error {}
export class ObjectNotRegistered extends Error {}

const refKey = (r: ObjectRef) => `${r.kind}/${r.namespace}/${r.name}`

/** Every ConfigMap and Secret a pod's spec names: volumes (projected too), envFrom and env of every container. */
export function podObjectRefs(pod: V1Pod): ObjectRef[] {
  const namespace = pod.metadata?.namespace ?? 'default'
  const out = new Map<string, ObjectRef>()
  const add = (kind: ObjectKind, name: string | undefined) => {
    if (!name) return
    const r = {kind, namespace, name}
    out.set(refKey(r), r)
  }
  for (const v of pod.spec?.volumes ?? []) {
    add('ConfigMap', v.configMap?.name)
    add('Secret', v.secret?.secretName)
    for (const s of v.projected?.sources ?? []) {
      add('ConfigMap', s.configMap?.name)
      add('Secret', s.secret?.name)
    }
  }
  const containers = allContainersWithEphemeral(pod)
  for (const c of containers) {
    for (const f of c.envFrom ?? []) {
      add('ConfigMap', f.configMapRef?.name)
      add('Secret', f.secretRef?.name)
    }
    for (const e of c.env ?? []) {
      add('ConfigMap', e.valueFrom?.configMapKeyRef?.name)
      add('Secret', e.valueFrom?.secretKeyRef?.name)
    }
  }
  return [...out.values()]
}

/** An immutable object never changes again: its watch can stop (the kubelet does the same). */
const isImmutable = (o: V1ConfigMap | V1Secret | null) => o?.immutable === true

/** One referenced object: who references it, what was last seen, its watch. */
class Entry {
  readonly pods = new Set<string>()
  /** undefined until the first listing. */
  object: V1ConfigMap | V1Secret | null | undefined
  private readonly waiters = new Set<() => void>()
  private readonly abort = new AbortController()
  loop: Promise<void> | undefined

  constructor(readonly ref: ObjectRef) {}

  get synced(): boolean {
    return this.object !== undefined
  }

  get signal(): AbortSignal {
    return this.abort.signal
  }

  /** Stores what the watch saw; true when the content changed (not on the first listing). */
  set(o: V1ConfigMap | V1Secret | null): boolean {
    const first = this.object === undefined
    const before = this.object
    this.object = o
    for (const w of this.waiters) w()
    this.waiters.clear()
    if (isImmutable(o)) this.abort.abort()
    return !first && !sameContent(before ?? null, o)
  }

  waitSynced(ms: number): Promise<void> {
    if (this.synced) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer)
        resolve()
      }
      const timer = setTimeout(() => {
        this.waiters.delete(done)
        const what = this.ref.kind === 'ConfigMap' ? 'configmap' : 'secret'
        reject(new ObjectNotSynced(`failed to sync ${what} cache: timed out waiting for the condition`))
      }, ms)
      this.waiters.add(done)
    })
  }

  async stop(): Promise<void> {
    this.abort.abort()
    for (const w of this.waiters) w()
    this.waiters.clear()
    await this.loop
  }
}

function sameContent(a: V1ConfigMap | V1Secret | null, b: V1ConfigMap | V1Secret | null): boolean {
  if (a === null || b === null) return a === b
  const body = (o: V1ConfigMap | V1Secret) => JSON.stringify([o.data ?? {}, (o as V1ConfigMap).binaryData ?? {}, (o as V1Secret).stringData ?? {}])
  return body(a) === body(b)
}

/**
 * The kubelet's watch-based ConfigMap and Secret managers: a pod registers
 * what it references, each referenced object gets one list+watch of its
 * own (fieldSelector metadata.name, on the shared watch loop: resume, relist
 * on 410 Gone, capped backoff) however many pods use it, and the watch stops
 * when the last of them is unregistered. Reads come from memory.
 *
 * One watch per object rather than one per namespace: a node sees only the
 * objects its pods name (what the Node authorizer allows a kubelet), and the
 * events of every other ConfigMap and Secret of a busy namespace are not
 * streamed to it; a per-namespace watch saves requests only when a
 * namespace's pods reference several objects.
 */
export class ObjectManager implements ReferencedObjects {
  private readonly entries = new Map<string, Entry>()
  /** pod uid -> what it references, and whom to tell about changes */
  private readonly pods = new Map<string, {keys: Set<string>; onChange?: (ref: ObjectRef) => void}>()
  private stopped = false

  constructor(
    private readonly core: CoreV1Api,
    private readonly kc: KubeConfig,
    private readonly counter?: RequestCounter,
    private readonly opts: {syncWaitMs?: number; retryInitialMs?: number; retryMaxMs?: number} = {},
  ) {}

  register(pod: V1Pod, onChange?: (ref: ObjectRef) => void): void {
    const uid = pod.metadata?.uid
    if (!uid || this.stopped) return
    const refs = podObjectRefs(pod)
    const keys = new Set(refs.map(refKey))
    const before = this.pods.get(uid)
    this.pods.set(uid, {keys, onChange})
    for (const r of refs) this.reference(refKey(r), r, uid)
    for (const k of before?.keys ?? []) if (!keys.has(k)) this.release(k, uid)
  }

  unregister(uid: string): void {
    const p = this.pods.get(uid)
    if (!p) return
    this.pods.delete(uid)
    for (const k of p.keys) this.release(k, uid)
  }

  async get<K extends ObjectKind>(kind: K, namespace: string, name: string): Promise<ReferencedObject<K> | null> {
    const ref = {kind, namespace, name}
    const e = this.entries.get(refKey(ref))
    if (!e) throw new ObjectNotRegistered(`${kind === 'ConfigMap' ? 'configmap' : 'secret'} "${namespace}/${name}" not registered`)
    await e.waitSynced(this.opts.syncWaitMs ?? DefaultObjectSyncWaitMs)
    return e.object as ReferencedObject<K> | null
  }

  /** Objects watched right now (tests, stats). */
  get size(): number {
    return this.entries.size
  }

  private reference(key: string, ref: ObjectRef, uid: string): void {
    let e = this.entries.get(key)
    if (!e) {
      e = new Entry(ref)
      this.entries.set(key, e)
      this.watch(e)
    }
    e.pods.add(uid)
  }

  private release(key: string, uid: string): void {
    const e = this.entries.get(key)
    if (!e) return
    e.pods.delete(uid)
    if (e.pods.size > 0) return
    this.entries.delete(key)
    void e.stop()
  }

  private watch(e: Entry): void {
    const {kind, namespace, name} = e.ref
    const fieldSelector = `metadata.name=${name}`
    const resource = kind === 'ConfigMap' ? 'configmaps' : 'secrets'
    e.loop = runWatchLoop(
      {
        kc: this.kc,
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/${resource}`,
        query: {fieldSelector},
        from: ListFirst,
        list: async () => {
          const list = kind === 'ConfigMap' ? await this.core.listNamespacedConfigMap({namespace, fieldSelector}) : await this.core.listNamespacedSecret({namespace, fieldSelector})
          this.observe(e, (list.items[0] as V1ConfigMap | V1Secret | undefined) ?? null)
          return list.metadata?.resourceVersion
        },
        // A deleted object reads as absent; what was written from it stays where it was written.
        onEvent: (type, obj) => this.observe(e, type === 'DELETED' ? null : (obj as V1ConfigMap | V1Secret)),
        counter: this.counter,
        retryInitialMs: this.opts.retryInitialMs,
        retryMaxMs: this.opts.retryMaxMs,
      },
      e.signal,
    ).catch(() => undefined)
  }

  private observe(e: Entry, o: V1ConfigMap | V1Secret | null): void {
    if (this.entries.get(refKey(e.ref)) !== e) return
    if (!e.set(o)) return
    for (const uid of e.pods) this.pods.get(uid)?.onChange?.(e.ref)
  }

  async stop(): Promise<void> {
    this.stopped = true
    const entries = [...this.entries.values()]
    this.entries.clear()
    this.pods.clear()
    await Promise.all(entries.map((e) => e.stop()))
  }
}
