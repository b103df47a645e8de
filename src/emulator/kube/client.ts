import type * as k8s from '@kubernetes/client-node'
import {existsSync} from 'node:fs'
import * as https from 'node:https'
import * as tls from 'node:tls'
import {UserError} from '../../errors.js'
import {DefaultEventBurst, DefaultEventQps, DefaultKubeApiBurst, DefaultKubeApiQps, RateLimiter} from './rate-limiter.js'

export interface KubeOptions {
  kubeconfig?: string
  context?: string
  /** Client-side rate limit, as the kubelet's --kube-api-qps / --kube-api-burst; qps <= 0 disables it. */
  qps?: number
  burst?: number
  /** The event client's own limit, as the kubelet's --event-qps / --event-burst; eventQps <= 0 disables it. */
  eventQps?: number
  eventBurst?: number
  /** Bounds each API request (not watches), as kubectl's --request-timeout; 0 or unset waits forever. */
  requestTimeoutMs?: number
}

/**
 * Counts the requests this process makes to the API server, by verb, so
 * idle cost can be measured from inside (and compared with the server's metrics).
 */
export class RequestCounter {
  total = 0
  readonly byMethod = new Map<string, number>()
  /** Keyed by "METHOD resource[/subresource]", e.g. "PATCH pods/status", "POST events". */
  readonly byResource = new Map<string, number>()

  record(method: string, url?: string): void {
    this.total++
    this.byMethod.set(method, (this.byMethod.get(method) ?? 0) + 1)
    if (url) {
      const key = `${method} ${resourceOf(url)}`
      this.byResource.set(key, (this.byResource.get(key) ?? 0) + 1)
    }
  }

  /** Watches open right now: a leak shows as a number that only grows. */
  openWatches = 0

  /** A watch was opened; the returned function (idempotent) says it ended. */
  watchOpened(): () => void {
    this.openWatches++
    let open = true
    return () => {
      if (open) this.openWatches--
      open = false
    }
  }
}

/** "pods/status" from ".../api/v1/namespaces/ns/pods/name/status?x=y"; the set of keys is bounded by the API's resources. */
export function resourceOf(url: string): string {
  const path = url.replace(/^[a-z]+:\/\/[^/]+/, '').split('?')[0]
  const parts = path.split('/').filter(Boolean)
  // /api/v1/... or /apis/<group>/<version>/...
  let i = parts[0] === 'api' ? 2 : parts[0] === 'apis' ? 3 : 0
  if (parts[i] === 'namespaces' && parts.length > i + 2) i += 2
  const resource = parts[i] ?? path
  const sub = parts[i + 2]
  return sub ? `${resource}/${sub}` : resource
}

/**
 * Idle sockets kept open to the API server. Sockets in use are not capped:
 * node-fetch 2 (under client-node) takes a request queued on a reused socket
 * for a premature close (node-fetch#1767); the rate limiter bounds them.
 */
export const DefaultMaxIdleApiSockets = 32
/**
 * An idle socket is closed after this long: the lease renewal (every 10 s)
 * keeps one connection warm, the extra sockets of a burst go away after it.
 */
export const DefaultApiSocketIdleMs = 15_000

type TlsOptions = https.AgentOptions
const TlsKeys = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const

function sameTls(a: TlsOptions, b: TlsOptions): boolean {
  return TlsKeys.every((k) => {
    const x = a[k] as unknown
    const y = b[k] as unknown
    return Buffer.isBuffer(x) && Buffer.isBuffer(y) ? x.equals(y) : x === y
  })
}

/**
 * The kubeconfig's authentication with connection reuse. client-node builds a
 * new https.Agent for every request, so every request paid a TLS handshake and
 * a new secure context (parsing the client key): most of vnode's CPU in a
 * burst of pod starts, and as much again on the API server. This keeps one
 * keep-alive agent per set of TLS options (they change only when the
 * credentials do, e.g. an exec plugin's rotated certificate) and lets the
 * kubeconfig set everything else (headers, tokens) per request as before.
 */
export class PooledAuthentication implements k8s.SecurityAuthentication {
  private agent: https.Agent | undefined

  constructor(
    private readonly kc: k8s.KubeConfig,
    private readonly maxIdleSockets = DefaultMaxIdleApiSockets,
  ) {}

  getName(): string {
    return 'kubeconfig authentication with connection reuse'
  }

  async applySecurityAuthentication(context: k8s.RequestContext): Promise<void> {
    await this.kc.applySecurityAuthentication(context)
    const fresh = context.getAgent()
    // Proxies and plain HTTP keep client-node's own agent.
    if (!(fresh instanceof https.Agent) || fresh.constructor !== https.Agent) return
    const options = (fresh as https.Agent & {options: TlsOptions}).options
    if (!this.agent || !sameTls((this.agent as https.Agent & {options: TlsOptions}).options, options)) {
      this.agent?.destroy()
      // One secure context for every connection: a burst opens many sockets, and each context parses the key again.
      const secureContext = tls.createSecureContext({ca: options.ca, cert: options.cert, key: options.key, pfx: options.pfx, passphrase: options.passphrase})
      this.agent = new https.Agent({...options, secureContext, keepAlive: true, maxFreeSockets: this.maxIdleSockets, timeout: DefaultApiSocketIdleMs})
    }
    context.setAgent(this.agent)
  }

  /** Closes the kept connections (the node stopped). */
  close(): void {
    this.agent?.destroy()
    this.agent = undefined
  }
}

/** The typed API clients one node uses, sharing one kubeconfig and one request counter. */
export interface KubeClients {
  k8s: typeof k8s
  kc: k8s.KubeConfig
  core: k8s.CoreV1Api
  /** The pod traffic's budget (--kube-api-qps/--kube-api-burst), for callers that take a token before they build a request. */
  limiter: RateLimiter
  /** Counted but not throttled: for requests whose token was taken from `limiter` beforehand. */
  preThrottledCore: k8s.CoreV1Api
  /** Events, with a rate limit of their own (the kubelet's event client): events never delay a pod's start. */
  events: k8s.CoreV1Api
  /** Node status and registration, unthrottled (the kubelet's heartbeat client). */
  heartbeatCore: k8s.CoreV1Api
  /** Leases, unthrottled (the kubelet's heartbeat client). */
  coordination: k8s.CoordinationV1Api
  /** TokenReview, for the kubelet API's bearer-token authentication. */
  authentication: k8s.AuthenticationV1Api
  /** SubjectAccessReview, for the kubelet API's authorization. */
  authorization: k8s.AuthorizationV1Api
  /** The server's version: the first request, that proves it answers. */
  version: k8s.VersionApi
  /** CertificateSigningRequests, for a cluster-signed serving certificate. */
  certificates: k8s.CertificatesV1Api
  server: string
  counter: RequestCounter
  /** Closes the connections kept open to the API server. */
  close(): void
}

/** Loads the kubeconfig the way kubectl does: --kubeconfig, then $KUBECONFIG, then ~/.kube/config. */
export async function loadKubeConfig(opts: KubeOptions): Promise<k8s.KubeConfig> {
  const lib = await import('@kubernetes/client-node')
  const kc = new lib.KubeConfig()
  try {
    if (opts.kubeconfig) {
      if (!existsSync(opts.kubeconfig)) throw new UserError(`kubeconfig ${opts.kubeconfig} does not exist`)
      kc.loadFromFile(opts.kubeconfig)
    } else {
      const {homedir} = await import('node:os')
      const {join} = await import('node:path')
      const files = (process.env.KUBECONFIG ?? '').split(':').filter(Boolean)
      const candidates = files.length > 0 ? files : [join(homedir(), '.kube', 'config')]
      if (!candidates.some((f) => existsSync(f)) && !process.env.KUBERNETES_SERVICE_HOST) {
        throw new UserError(
          `no kubeconfig found (${files.length > 0 ? `KUBECONFIG=${process.env.KUBECONFIG}` : '~/.kube/config'}): ` +
            'pass --kubeconfig, set KUBECONFIG, or start a local control plane with `kubectl vnode cluster up`',
        )
      }
      kc.loadFromDefault()
    }
  } catch (error) {
    if (error instanceof UserError) throw error
    throw new UserError(`cannot load kubeconfig ${opts.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config'}: ${(error as Error).message.split('\n')[0]}`)
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) throw new UserError(`context "${opts.context}" does not exist in the kubeconfig`)
    kc.setCurrentContext(opts.context)
  }
  if (!kc.getCurrentCluster()) {
    throw new UserError('no current cluster in the kubeconfig: set one with --context or `kubectl config use-context`')
  }
  return kc
}

export async function makeClients(opts: KubeOptions): Promise<KubeClients> {
  const lib = await import('@kubernetes/client-node')
  const kc = await loadKubeConfig(opts)
  const server = kc.getCurrentCluster()!.server
  const counter = new RequestCounter()
  const auth = new PooledAuthentication(kc)
  const limiter = new RateLimiter(opts.qps ?? DefaultKubeApiQps, opts.burst ?? DefaultKubeApiBurst)
  const eventLimiter = new RateLimiter(opts.eventQps ?? DefaultEventQps, opts.eventBurst ?? DefaultEventBurst)
  const configuration = (limit: RateLimiter | undefined) =>
    lib.createConfiguration({
      baseServer: new lib.ServerConfiguration(server, {}),
      authMethods: {default: auth},
      promiseMiddleware: [
        {
          pre: async (ctx) => {
            await limit?.acquire()
            counter.record(ctx.getHttpMethod(), ctx.getUrl())
            // The timeout starts once the request may go: time spent waiting for a token is not the server's.
            if (opts.requestTimeoutMs) ctx.setSignal(AbortSignal.timeout(opts.requestTimeoutMs))
            return ctx
          },
          post: async (res) => res,
        },
      ],
    })
  const config = configuration(limiter)
  // The kubelet's heartbeatClient: lease renewals and node status never wait behind pod traffic
  // (a storm of pod updates must not make the node NotReady and get its pods evicted).
  const heartbeat = configuration(undefined)
  const unthrottledCore = new lib.CoreV1Api(heartbeat)
  return {
    k8s: lib,
    kc,
    core: new lib.CoreV1Api(config),
    events: new lib.CoreV1Api(configuration(eventLimiter)),
    limiter,
    preThrottledCore: unthrottledCore,
    heartbeatCore: unthrottledCore,
    coordination: new lib.CoordinationV1Api(heartbeat),
    authentication: new lib.AuthenticationV1Api(config),
    authorization: new lib.AuthorizationV1Api(config),
    version: new lib.VersionApi(heartbeat),
    certificates: new lib.CertificatesV1Api(config),
    server,
    counter,
    close: () => auth.close(),
  }
}
