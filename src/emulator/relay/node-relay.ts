import type {CoreV1Api, KubeConfig, V1OwnerReference, V1Pod} from '@kubernetes/client-node'
import {describeApiError, isAlreadyExists, isNotFound, statusCode} from '../kube/errors.js'
import type {RequestCounter} from '../kube/client.js'
import {runWatchLoop} from '../kube/watch-loop.js'
import {PortForwardConnection} from './portforward-client.js'
import {RelayConfigAnnotation, relayConfigHash, relayConfigMap, relayName, relayPod, type RelaySpec} from './relay-pod.js'
import {TunnelPool} from './tunnels.js'

/**
 * The relay of one node: makes its ConfigMap and pod, waits for the pod to
 * run, keeps the tunnel pool to it, makes the pod again when it is deleted
 * (its new IP handed to onEndpoint), and deletes both on stop.
 */

export interface NodeRelayDeps {
  kc: KubeConfig
  core: CoreV1Api
  counter?: RequestCounter
  /** The Node as the relay's owner (its uid changes when the node is registered again). */
  owner: () => V1OwnerReference | undefined
  /** vnode's kubelet server, where a paired tunnel's bytes go. */
  local: {host: string; port: number}
  log: (line: string) => void
  /** The relay pod's IP changed (a new pod): publish it. */
  onEndpoint: (ip: string) => Promise<void>
}

export interface NodeRelayOptions {
  /** How long the pod has to run and the first tunnel to reach it (image pulls included). */
  readyTimeoutMs?: number
  idleTunnels?: number
  pollMs?: number
}

export const DefaultRelayReadyTimeoutMs = 120_000

export class NodeRelay {
  readonly name: string
  ip: string | undefined
  readonly pool: TunnelPool
  private readonly abort = new AbortController()
  private loops: Promise<void>[] = []
  private replacing: Promise<void> | undefined

  constructor(
    readonly spec: RelaySpec,
    private readonly deps: NodeRelayDeps,
    private readonly opts: NodeRelayOptions = {},
  ) {
    this.name = relayName(spec.node)
    this.pool = new TunnelPool({
      connect: () => PortForwardConnection.open(deps.kc, spec.namespace, this.name),
      tunnelPort: spec.tunnelPort,
      local: deps.local,
      idle: opts.idleTunnels,
      onState: (up, detail) => deps.log(up ? `relay: tunnels to ${spec.namespace}/${this.name} are up` : `relay: tunnels to ${spec.namespace}/${this.name} are down (${detail}); reconnecting`),
    })
  }

  get ref(): string {
    return `${this.spec.namespace}/${this.name}`
  }

  /** The relay running and a tunnel up; resolves with the relay pod's IP. */
  async start(): Promise<string> {
    await this.ensureNamespace()
    await this.applyConfigMap()
    this.ip = await this.ensurePod()
    this.loops.push(this.pool.run(this.abort.signal))
    await this.until(() => this.pool.up, 'a tunnel to reach the relay', 30_000).catch((error: Error) => {
      throw new Error(`${error.message}${this.pool.lastError ? `: ${this.pool.lastError}` : ''}`, {cause: error})
    })
    this.loops.push(this.watch())
    return this.ip
  }

  /** Stops the tunnels and deletes the pod and the ConfigMap. */
  async stop(): Promise<void> {
    this.abort.abort()
    await Promise.allSettled([...this.loops, this.replacing])
    const {core} = this.deps
    const ns = this.spec.namespace
    await core.deleteNamespacedPod({name: this.name, namespace: ns, gracePeriodSeconds: 0}).catch((e) => isNotFound(e) || this.deps.log(`relay: cannot delete pod ${this.ref}: ${describeApiError(e)}`))
    await core.deleteNamespacedConfigMap({name: this.name, namespace: ns}).catch((e) => isNotFound(e) || this.deps.log(`relay: cannot delete configmap ${this.ref}: ${describeApiError(e)}`))
  }

  private async ensureNamespace(): Promise<void> {
    try {
      await this.deps.core.createNamespace({body: {metadata: {name: this.spec.namespace, labels: {'app.kubernetes.io/managed-by': 'kubectl-vnode'}}}})
    } catch (error) {
      // 403: the user may not create namespaces; the namespace may exist all the same.
      if (isAlreadyExists(error) || statusCode(error) === 403) return
      throw error
    }
  }

  private async applyConfigMap(): Promise<void> {
    const body = relayConfigMap(this.spec, this.deps.owner())
    const namespace = this.spec.namespace
    try {
      await this.deps.core.createNamespacedConfigMap({namespace, body})
    } catch (error) {
      if (!isAlreadyExists(error)) throw error
      await this.deps.core.replaceNamespacedConfigMap({name: this.name, namespace, body})
    }
  }

  /** The pod, made again when the one there runs something else or is going; resolves with its IP once ready. */
  private async ensurePod(): Promise<string> {
    const {core} = this.deps
    const namespace = this.spec.namespace
    const existing = await core.readNamespacedPod({name: this.name, namespace}).catch((e) => (isNotFound(e) ? undefined : Promise.reject(e)))
    const keep =
      existing &&
      !existing.metadata?.deletionTimestamp &&
      existing.metadata?.annotations?.[RelayConfigAnnotation] === relayConfigHash(this.spec) &&
      existing.metadata?.ownerReferences?.[0]?.uid === this.deps.owner()?.uid &&
      !['Failed', 'Succeeded'].includes(existing.status?.phase ?? '')
    if (existing && !keep) {
      await core.deleteNamespacedPod({name: this.name, namespace, gracePeriodSeconds: 0}).catch((e) => isNotFound(e) || Promise.reject(e))
    }
    if (!keep) await this.create()
    return this.waitReady()
  }

  private async create(): Promise<void> {
    const body = relayPod(this.spec, this.deps.owner())
    const deadline = Date.now() + 60_000
    for (;;) {
      try {
        await this.deps.core.createNamespacedPod({namespace: this.spec.namespace, body})
        return
      } catch (error) {
        // The pod deleted a moment ago is still there: wait until it is gone. A namespace just made has no
        // default ServiceAccount for a moment, and admission refuses pods until the controller makes it.
        if (!(isAlreadyExists(error) || serviceAccountPending(error)) || Date.now() > deadline || this.abort.signal.aborted) throw error
        await sleep(500)
      }
    }
  }

  private async waitReady(): Promise<string> {
    let last: V1Pod | undefined
    try {
      await this.until(
        async () => {
          last = await this.deps.core.readNamespacedPod({name: this.name, namespace: this.spec.namespace}).catch(() => undefined)
          return ready(last) !== undefined
        },
        'the relay pod to be ready',
        this.opts.readyTimeoutMs ?? DefaultRelayReadyTimeoutMs,
      )
    } catch (error) {
      throw new Error(`${(error as Error).message}: ${podProblem(last)}`, {cause: error})
    }
    return ready(last)!
  }

  /** The relay pod's watch: a deleted or finished pod is made again; a new IP is published. */
  private watch(): Promise<void> {
    return runWatchLoop(
      {
        kc: this.deps.kc,
        path: `/api/v1/namespaces/${this.spec.namespace}/pods`,
        query: {fieldSelector: `metadata.name=${this.name}`},
        from: undefined,
        list: async () => {
          const list = await this.deps.core.listNamespacedPod({namespace: this.spec.namespace, fieldSelector: `metadata.name=${this.name}`})
          const pod = list.items[0]
          this.observe(pod ? 'MODIFIED' : 'DELETED', pod)
          return list.metadata?.resourceVersion
        },
        onEvent: (type, obj) => this.observe(type, obj as V1Pod),
        counter: this.deps.counter,
      },
      this.abort.signal,
    )
  }

  private observe(type: string, pod: V1Pod | undefined): void {
    if (this.abort.signal.aborted) return
    const gone = type === 'DELETED' || !pod || pod.metadata?.deletionTimestamp !== undefined || ['Failed', 'Succeeded'].includes(pod.status?.phase ?? '')
    if (gone) {
      this.replacing ??= this.replace().finally(() => (this.replacing = undefined))
      return
    }
    const ip = ready(pod)
    if (ip && ip !== this.ip && !this.replacing) void this.publish(ip)
  }

  private async replace(): Promise<void> {
    this.deps.log(`relay: pod ${this.ref} is gone; making it again`)
    while (!this.abort.signal.aborted) {
      try {
        await this.applyConfigMap()
        await this.create()
        await this.publish(await this.waitReady())
        return
      } catch (error) {
        if (this.abort.signal.aborted) return
        this.deps.log(`relay: cannot make pod ${this.ref} again: ${describeApiError(error)}`)
        await sleep(2_000)
      }
    }
  }

  private async publish(ip: string): Promise<void> {
    if (ip === this.ip) return
    this.ip = ip
    this.deps.log(`relay: pod ${this.ref} is at ${ip}`)
    await this.deps.onEndpoint(ip)
  }

  private async until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!(await cond())) {
      if (this.abort.signal.aborted) throw new Error('relay stopped')
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`)
      await sleep(this.opts.pollMs ?? 500)
    }
  }
}

/** The pod's IP once it is Ready (the relay listens), else undefined. */
function ready(pod: V1Pod | undefined): string | undefined {
  if (!pod || pod.metadata?.deletionTimestamp || pod.status?.phase !== 'Running') return undefined
  if (!pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return undefined
  return pod.status.podIP || undefined
}

/** Why a pod is not ready, in a few words (unscheduled, an image that does not pull, a crash). */
function podProblem(pod: V1Pod | undefined): string {
  if (!pod) return 'the pod does not exist'
  const unscheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False')
  if (unscheduled) return `not scheduled: ${unscheduled.message ?? unscheduled.reason ?? ''}`
  const cs = pod.status?.containerStatuses?.[0]
  const waiting = cs?.state?.waiting
  if (waiting) return `${waiting.reason ?? 'waiting'}${waiting.message ? `: ${waiting.message}` : ''}`
  const term = cs?.lastState?.terminated
  if (term) return `the relay exited ${term.exitCode}${term.reason ? ` (${term.reason})` : ''}`
  return `phase ${pod.status?.phase ?? 'unknown'}${pod.spec?.nodeName ? ` on node ${pod.spec.nodeName}` : ''}`
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/** 403 from the ServiceAccount admission plugin: the namespace's default ServiceAccount is not made yet. */
export function serviceAccountPending(error: unknown): boolean {
  if (statusCode(error) !== 403) return false
  const e = error as {body?: unknown; message?: string}
  const text = typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? e.message ?? '')
  return /error looking up service account [^:]+: serviceaccount .* not found/.test(text)
}
