import type {IncomingMessage, ServerResponse} from 'node:http'
import {createServer, type Server} from 'node:https'
import type {AddressInfo, Socket} from 'node:net'
import {UserError} from '../../errors.js'
import type {ContainerStreaming} from '../provider/streaming.js'
import {type AuthorizationMode, KubeletAuth, type Reviewer} from './auth.js'
import {NoContainerLogs} from '../provider/logs.js'
import {type NodeUsage, readNodeUsage} from './node-usage.js'
import {defaultRunningCheck, type KubeletSources} from './sources.js'
import {type ServedCert, ServingCerts, type ServingCertSource} from './serving-certs.js'
import {send, sendWith} from './routes/respond.js'
import type {RouteContext} from './routes/route.js'
import {findRoute} from './routes/table.js'
import type {Cuttable} from './streaming/request.js'
import {rejectSocket} from './spdy/upgrade.js'
import {SummaryBuilder} from './summary.js'

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
  /** The runtime's exec and attach (read on each request: the runtime may come later than the server). */
  streaming?: () => ContainerStreaming | undefined
  /** The kubelet's streamCreationTimeout and streamingConnectionIdleTimeout (default 30 s and 4 h). */
  streamCreationTimeoutMs?: number
  streamIdleTimeoutMs?: number
  /** Where the serving certificate comes from (`up --serving-cert`); default self-signed. */
  servingCert?: ServingCertSource
}

export class KubeletServer {
  private server?: Server
  private readonly auth: KubeletAuth
  /** Log follows in progress (the routes add and remove them; stop aborts them). */
  private readonly follows = new Set<AbortController>()
  private readonly sessions = new Set<Cuttable>()
  private readonly context: RouteContext
  private readonly certs: ServingCerts

  constructor(private readonly opts: KubeletServerOptions) {
    this.certs = new ServingCerts({stateDir: opts.stateDir, nodeName: opts.nodeName, source: opts.servingCert, onServe: (c) => this.serve(c)})
    this.auth = new KubeletAuth({
      nodeName: opts.nodeName,
      anonymousAuth: opts.anonymousAuth,
      authorizationMode: opts.authorizationMode,
      clientCa: opts.clientCa !== undefined,
      reviewer: opts.reviewer,
    })
    this.context = {
      nodeName: opts.nodeName,
      sources: opts.sources,
      readNode: () => (this.opts.readNode ?? readNodeUsage)(),
      logs: opts.sources.logs ?? NoContainerLogs,
      summaries: new SummaryBuilder(),
      follows: this.follows,
      streaming: {
        pods: () => this.opts.sources.pods(),
        isRunning: (pod) => (this.opts.sources.isRunning ?? defaultRunningCheck(this.opts.sources.usage))(pod),
        streaming: () => this.opts.streaming?.(),
        sessions: this.sessions,
        creationTimeoutMs: opts.streamCreationTimeoutMs,
        idleTimeoutMs: opts.streamIdleTimeoutMs,
      },
    }
  }

  /** The port actually listened on (useful with port 0). */
  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0
  }

  get activeStreams(): number {
    return this.follows.size
  }

  /** Open exec, attach and port-forward connections. */
  get activeSessions(): number {
    return this.sessions.size
  }

  async start(): Promise<void> {
    const served = await this.certs.first(this.opts.sans)
    const server = createServer(
      {
        key: served.key,
        cert: served.cert,
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
    // The cluster's certificate came while the server was made: served from now on.
    if (this.certs.current && this.certs.current !== served) this.serve(this.certs.current)
  }

  /** Covers more names or addresses (a relay's IP): the certificate is issued again and served to new connections. */
  async addSans(sans: string[]): Promise<void> {
    const all = [...new Set([...this.opts.sans, ...sans])]
    if (all.length === this.opts.sans.length) return
    this.opts.sans = all
    await this.certs.cover(all)
  }

  /** The certificate served once what start asked of the cluster is settled (at once when nothing is pending). */
  async servingSettled(): Promise<ServedCert | undefined> {
    await this.certs.settled()
    return this.certs.current
  }

  /** The certificate served now. */
  get cert(): ServedCert | undefined {
    return this.certs.current
  }

  private serve(cert: ServedCert): void {
    this.server?.setSecureContext({key: cert.key, cert: cert.cert, minVersion: 'TLSv1.2', ...(this.opts.clientCa ? {ca: this.opts.clientCa} : {})})
  }

  /** Ends log streams, closes every connection, and stops listening. */
  async stop(): Promise<void> {
    await this.certs.stop()
    for (const s of this.follows) s.abort()
    for (const s of this.sessions) s.destroy()
    const server = this.server
    this.server = undefined
    if (!server) return
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeAllConnections()
    await closed
    this.auth.clear()
  }

  /** Plain requests: authenticated and authorized, then routed; an unknown path is 404 before its method is looked at. */
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? '/', 'https://kubelet')
      const outcome = await this.auth.check(req, decodedPath(url))
      if (!outcome.ok) return send(res, outcome.status, outcome.message)
      const route = findRoute(url.pathname)
      if (!route) return send(res, 404, '404 page not found\n')
      if (!route.methods.includes(req.method ?? '')) return send(res, 405, '405: Method Not Allowed')
      if (route.kind === 'plain') return await route.serve(req, res, url, this.context)
      await route.serve({req, url, respond: (status, body, headers) => sendWith(res, status, body, headers)}, this.context.streaming)
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
      const route = findRoute(url.pathname)
      if (route?.kind !== 'streaming') return rejectSocket(socket, 404, '404 page not found')
      if (!route.methods.includes(req.method ?? '')) return rejectSocket(socket, 405, '405: Method Not Allowed')
      await route.serve({req, url, socket, head, respond: (status, body, headers) => rejectSocket(socket, status, body, headers)}, this.context.streaming)
    } catch (error) {
      rejectSocket(socket, 500, `Internal Server Error: ${(error as Error).message}`)
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
