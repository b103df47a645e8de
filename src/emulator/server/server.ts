import type {V1Pod} from '@kubernetes/client-node'
import type {IncomingMessage, ServerResponse} from 'node:http'
import {createServer, type Server} from 'node:https'
import type {AddressInfo, Socket} from 'node:net'
import {UserError} from '../../errors.js'
import type {ContainerStreaming} from '../provider/streaming.js'
import {serveAttach} from './attach.js'
import {type AuthorizationMode, KubeletAuth, type Reviewer} from './auth.js'
import {LogOptionsError, parseLogOptions} from './log-options.js'
import {CriContainerLogs} from '../runtime/container-logs.js'
import {LogFormatter} from '../runtime/log-reader.js'
import {type ContainerLogs, isContainerLogRefusal} from '../provider/logs.js'
import {serveExec} from './exec.js'
import {MetricsContentType, resourceMetrics} from './metrics.js'
import {type NodeUsage, readNodeUsage} from './node-usage.js'
import {PodPidsAnnotation} from '../node/node-status.js'
import {servePortForward} from './portforward.js'
import {defaultRunningCheck, type KubeletSources, type PodUsage} from './sources.js'
import {ensureServingCert, type ServingCert} from './serving-cert.js'
import type {Cuttable, StreamingConnection, StreamingDeps} from './streaming/request.js'
import {rejectSocket} from './streaming/upgrade.js'
import {metaTime, SummaryBuilder} from './summary.js'
import {nameProblem, pathSegments} from './validate.js'

/**
 * The kubelet HTTPS API of one node (pkg/kubelet/server/server.go): what the
 * API server proxies `kubectl logs`, nodes/proxy and metrics-server to.
 */

/** The kubelet's http.Server limits: IdleTimeout 90 s, ReadHeaderTimeout-like 30 s, MaxHeaderBytes 1 MiB. */
export const DefaultIdleTimeoutMs = 90_000
export const DefaultHeadersTimeoutMs = 30_000
export const MaxHeaderBytes = 1 << 20

export interface KubeletServerOptions {
  nodeName: string
  port: number
  /** Listen address; default all addresses. */
  host?: string
  stateDir: string
  /** Names and addresses the serving certificate covers. */
  sans: string[]
  sources: KubeletSources
  anonymousAuth: boolean
  authorizationMode: AuthorizationMode
  /** PEM of the CA client certificates must chain to; none disables x509 authentication. */
  clientCa?: Buffer
  reviewer: Reviewer
  readNode?: () => NodeUsage
  followPollMs?: number
  /** The runtime's container logs; default: the CRI log files under stateDir for the pods of sources. */
  logs?: ContainerLogs
  /** The runtime's exec and attach (read on each request: the runtime may come later than the server). */
  streaming?: () => ContainerStreaming | undefined
  /** The kubelet's streamCreationTimeout and streamingConnectionIdleTimeout (default 30 s and 4 h). */
  streamCreationTimeoutMs?: number
  streamIdleTimeoutMs?: number
}

type StreamingHandler = (conn: StreamingConnection, deps: StreamingDeps) => Promise<void>

/** exec, attach and portForward: upgraded to SPDY streams; authorized as subresource proxy. */
const StreamingRoutes: [string, StreamingHandler][] = [
  ['/exec/', serveExec],
  ['/attach/', serveAttach],
  ['/portForward/', servePortForward],
]

function streamingRoute(path: string): StreamingHandler | undefined {
  return StreamingRoutes.find(([prefix]) => path.startsWith(prefix))?.[1]
}

type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void

function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, {'Content-Type': contentType, 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body)})
  res.end(body)
}

/** JSON as the API writes it: client-node models carry Dates, which become RFC 3339 seconds. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v: unknown) {
    const original = this[key]
    return original instanceof Date ? metaTime(original) : v
  })
}

function sendWith(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
  send(res, status, body.endsWith('\n') ? body : `${body}\n`)
}

function sendJson(res: ServerResponse, value: unknown): void {
  send(res, 200, toJson(value), 'application/json')
}

/** One path and its trailing-slash twin. */
function both(path: string): string[] {
  return [path, `${path}/`]
}

export class KubeletServer {
  private server?: Server
  private readonly auth: KubeletAuth
  private readonly summaries = new SummaryBuilder()
  private readonly streams = new Set<AbortController>()
  private readonly routes = new Map<string, Handler>()
  private readonly sessions = new Set<Cuttable>()
  private readonly streamingDeps: StreamingDeps
  private readonly logs: ContainerLogs
  cert?: ServingCert

  constructor(private readonly opts: KubeletServerOptions) {
    this.logs = opts.logs ?? new CriContainerLogs(opts.stateDir, opts.sources.pods, opts.followPollMs)
    this.auth = new KubeletAuth({
      nodeName: opts.nodeName,
      anonymousAuth: opts.anonymousAuth,
      authorizationMode: opts.authorizationMode,
      clientCa: opts.clientCa !== undefined,
      reviewer: opts.reviewer,
    })
    const healthz: Handler = (_req, res) => send(res, 200, 'ok')
    for (const p of ['/healthz', '/healthz/', '/healthz/ping', '/healthz/log', '/healthz/syncloop']) this.routes.set(p, healthz)
    for (const p of both('/pods')) this.routes.set(p, (_req, res) => sendJson(res, this.podList(this.opts.sources.pods())))
    for (const p of both('/runningpods')) this.routes.set(p, (_req, res) => sendJson(res, this.podList(this.runningPods())))
    for (const p of both('/stats/summary')) this.routes.set(p, (_req, res) => sendJson(res, this.summary()))
    for (const p of both('/metrics/resource')) this.routes.set(p, (_req, res) => this.metrics(res))
    this.streamingDeps = {
      pods: () => this.opts.sources.pods(),
      isRunning: (pod) => (this.opts.sources.isRunning ?? defaultRunningCheck(this.opts.sources.usage))(pod),
      streaming: () => this.opts.streaming?.(),
      sessions: this.sessions,
      creationTimeoutMs: opts.streamCreationTimeoutMs,
      idleTimeoutMs: opts.streamIdleTimeoutMs,
    }
  }

  /** The port actually listened on (useful with port 0). */
  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0
  }

  get activeStreams(): number {
    return this.streams.size
  }

  /** Open exec, attach and port-forward connections. */
  get activeSessions(): number {
    return this.sessions.size
  }

  async start(): Promise<void> {
    this.cert = await ensureServingCert(this.opts.stateDir, this.opts.nodeName, this.opts.sans)
    const server = createServer(
      {
        key: this.cert.key,
        cert: this.cert.cert,
        // Ask for a client certificate but let the handshake finish without one: tokens are checked after it.
        requestCert: true,
        rejectUnauthorized: false,
        ...(this.opts.clientCa ? {ca: this.opts.clientCa} : {}),
        minVersion: 'TLSv1.2',
        maxHeaderSize: MaxHeaderBytes,
        keepAliveTimeout: DefaultIdleTimeoutMs,
        headersTimeout: DefaultHeadersTimeoutMs,
        // Log follows are long responses; the request itself is a small GET.
        requestTimeout: 0,
      },
      (req, res) => void this.handle(req, res),
    )
    server.on('tlsClientError', () => undefined)
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => void this.handleUpgrade(req, socket, head))
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(new UserError(`cannot serve the kubelet API on port ${this.opts.port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`)),
      )
      server.listen(this.opts.port, this.opts.host, () => resolve())
    })
    server.on('error', () => undefined)
    this.server = server
  }

  /** Ends log streams, closes every connection, and stops listening. */
  async stop(): Promise<void> {
    for (const s of this.streams) s.abort()
    for (const s of this.sessions) s.destroy()
    const server = this.server
    this.server = undefined
    if (!server) return
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeAllConnections()
    await closed
    this.auth.clear()
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? '/', 'https://kubelet')
      const outcome = await this.auth.check(req, decodedPath(url))
      if (!outcome.ok) return send(res, outcome.status, outcome.message)
      const streaming = streamingRoute(url.pathname)
      if (streaming) {
        if (req.method !== 'GET' && req.method !== 'POST') return send(res, 405, '405: Method Not Allowed')
        return await streaming({req, url, respond: (status, body, headers) => sendWith(res, status, body, headers)}, this.streamingDeps)
      }
      const route = url.pathname.startsWith('/containerLogs/') ? (r: IncomingMessage, s: ServerResponse, u: URL) => this.containerLogs(r, s, u) : this.routes.get(url.pathname)
      if (!route) return send(res, 404, '404 page not found\n')
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, '405: Method Not Allowed')
      await route(req, res, url)
    } catch (error) {
      if (!res.headersSent) send(res, 500, `Internal Server Error: ${(error as Error).message}`)
      else res.destroy()
    }
  }

  /** Requests that asked to switch protocols: the streaming routes, authenticated and authorized as any other. */
  private async handleUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => undefined)
    try {
      const url = new URL(req.url ?? '/', 'https://kubelet')
      const outcome = await this.auth.check(req, decodedPath(url))
      if (!outcome.ok) return rejectSocket(socket, outcome.status, outcome.message)
      const streaming = streamingRoute(url.pathname)
      if (!streaming) return rejectSocket(socket, 404, '404 page not found')
      if (req.method !== 'GET' && req.method !== 'POST') return rejectSocket(socket, 405, '405: Method Not Allowed')
      await streaming({req, url, socket, head, respond: (status, body, headers) => rejectSocket(socket, status, body, headers)}, this.streamingDeps)
    } catch (error) {
      rejectSocket(socket, 500, `Internal Server Error: ${(error as Error).message}`)
    }
  }

  private podList(pods: V1Pod[]): unknown {
    return {kind: 'PodList', apiVersion: 'v1', metadata: {}, items: pods.map((p) => ({...p, kind: undefined, apiVersion: undefined}))}
  }

  /** The runtime's view: identity and containers only, as the kubelet's /runningpods/ reports. */
  private runningPods(): V1Pod[] {
    const running = this.opts.sources.isRunning ?? defaultRunningCheck(this.opts.sources.usage)
    const pids = new Map((this.opts.sources.usage?.() ?? []).map((u) => [u.uid, u.containers.filter((c) => c.pid).map((c) => `${c.name}=${c.pid}`).join(',')]))
    return this.opts.sources
      .pods()
      .filter(running)
      .map((p) => ({
        metadata: {
          name: p.metadata?.name,
          namespace: p.metadata?.namespace,
          uid: p.metadata?.uid,
          creationTimestamp: undefined,
          // The process ids behind the pod (`kubectl vnode pods -o wide` shows them).
          ...(pids.get(p.metadata?.uid ?? '') ? {annotations: {[PodPidsAnnotation]: pids.get(p.metadata!.uid!)!}} : {}),
        },
        spec: {containers: (p.spec?.containers ?? []).map((c) => ({name: c.name, image: c.image}))},
        status: {},
      }))
  }

  private summary(): unknown {
    const node = (this.opts.readNode ?? readNodeUsage)()
    return this.summaries.build(this.opts.nodeName, node, this.opts.sources.usage?.() ?? [], this.opts.sources.pods())
  }

  private metrics(res: ServerResponse): void {
    let node: NodeUsage | undefined
    let failed = false
    try {
      node = (this.opts.readNode ?? readNodeUsage)()
    } catch {
      failed = true
    }
    let usage: PodUsage[] = []
    try {
      usage = this.opts.sources.usage?.() ?? []
    } catch {
      failed = true
    }
    send(res, 200, resourceMetrics(node, usage, new Date(), failed), MetricsContentType)
  }

  private async containerLogs(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const segs = pathSegments(url.pathname, '/containerLogs/')
    if (!segs) return send(res, 400, 'invalid path: bad percent-encoding')
    if (segs.length !== 3) return send(res, 404, '404 page not found\n')
    const [namespace, pod, container] = segs
    if (!pod) return send(res, 400, '{"message": "Missing podID."}')
    if (!container) return send(res, 400, '{"message": "Missing container name."}')
    if (!namespace) return send(res, 400, '{"message": "Missing podNamespace."}')
    const problem = nameProblem('namespace', namespace) ?? nameProblem('pod', pod) ?? nameProblem('container', container)
    if (problem) return send(res, 400, problem)
    let opts
    try {
      opts = parseLogOptions(url.searchParams)
    } catch (error) {
      if (error instanceof LogOptionsError) return send(res, 400, error.message)
      throw error
    }
    const log = this.logs.getContainerLogs({namespace, pod, container}, opts.previous)
    if (isContainerLogRefusal(log)) return send(res, log.status, log.message)
    res.writeHead(200, {'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff'})
    // The kubelet flushes at once, so a following client sees the response start before any line.
    res.flushHeaders()
    if (req.method === 'HEAD') return void res.end()
    const abort = new AbortController()
    this.streams.add(abort)
    const onClose = () => abort.abort()
    res.on('close', onClose)
    const write = (chunk: string) =>
      new Promise<void>((resolve) => {
        if (abort.signal.aborted || res.write(chunk)) return resolve()
        const done = () => {
          res.off('drain', done)
          abort.signal.removeEventListener('abort', done)
          resolve()
        }
        res.on('drain', done)
        abort.signal.addEventListener('abort', done, {once: true})
      })
    try {
      const fmt = new LogFormatter(opts, write)
      await log.read(
        async (record) => {
          await fmt.record(record)
          return fmt.done
        },
        {tailLines: opts.tailLines, follow: opts.follow ? {signal: abort.signal} : undefined},
      )
      res.end()
    } finally {
      res.off('close', onClose)
      this.streams.delete(abort)
    }
  }
}

/** The path as authorized: decoded, or raw when it does not decode (routing then rejects it). */
function decodedPath(url: URL): string {
  try {
    return decodeURIComponent(url.pathname)
  } catch {
    return url.pathname
  }
}
