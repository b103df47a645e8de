import {X509Certificate} from 'node:crypto'
import type {IncomingMessage, ServerResponse} from 'node:http'
import {createServer, type Server} from 'node:https'
import type {AddressInfo, Socket} from 'node:net'
import {UserError} from '../../errors.js'
import type {ContainerStreaming} from '../provider/streaming.js'
import {type AuthorizationMode, KubeletAuth, type Reviewer} from './auth.js'
import {NoContainerLogs} from '../provider/logs.js'
import {type NodeUsage, readNodeUsage} from './node-usage.js'
import {defaultRunningCheck, type KubeletSources} from './sources.js'
import {DefaultServingRenewBeforeMs, ensureServingCert} from './serving-cert.js'
import {type CsrApi, DefaultAutoCsrWaitMs, DefaultCsrWaitMs, keptClusterCert, KubeletServingSigner, requestServingCert, type ServingCertMode} from './serving-csr.js'
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

export interface ServingCertSource {
  /** auto: a cluster-signed one when the cluster issues it within waitMs, else self-signed; csr: cluster-signed or an error. */
  mode: ServingCertMode
  api?: CsrApi
  /** The cluster's API server URL: a kept certificate is used again only for the cluster that issued it. */
  cluster?: string
  waitMs?: number
  /** One line per certificate served, and why. */
  log?: (line: string) => void
}

/** The certificate served, and who signed it. */
export interface ServedCert {
  cert: Buffer
  key: Buffer
  signedBy: 'self' | 'cluster'
}

export class KubeletServer {
  private server?: Server
  private readonly auth: KubeletAuth
  /** Log follows in progress (the routes add and remove them; stop aborts them). */
  private readonly follows = new Set<AbortController>()
  private readonly sessions = new Set<Cuttable>()
  private readonly context: RouteContext
  private renewal?: NodeJS.Timeout
  /** The cluster-signed certificate asked for in the background at start (auto), until it is served or given up. */
  private pending?: Promise<void>
  private readonly stopping = new AbortController()
  cert?: ServedCert

  constructor(private readonly opts: KubeletServerOptions) {
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
    const served = await this.firstCert(this.opts.sans)
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
    if (this.cert && this.cert !== served) this.serve(this.cert)
  }

  /** Covers more names or addresses (a relay's IP): the certificate is issued again and served to new connections. */
  async addSans(sans: string[]): Promise<void> {
    const all = [...new Set([...this.opts.sans, ...sans])]
    if (all.length === this.opts.sans.length) return
    this.opts.sans = all
    this.serve(await this.servingCert(all))
  }

  /**
   * The certificate to listen with. auto without a kept cluster-signed one:
   * the self-signed one at once, and the cluster's served once issued (as the
   * kubelet's certificate manager does), so a slow or silent signer never
   * delays the node. csr waits for the cluster's; self-signed never asks.
   */
  private async firstCert(sans: string[]): Promise<ServedCert> {
    const source = this.opts.servingCert
    if (source?.mode !== 'auto' || !source.api) return (this.cert = await this.servingCert(sans))
    const kept = await this.keptCert(sans)
    if (kept) return (this.cert = kept)
    // Set before the cluster is asked, so the cluster's, when it comes, is never replaced by it.
    const own = (this.cert = await this.selfSigned(sans))
    this.pending = this.servingCert(sans, false).then(
      (c) => {
        if (c.signedBy === 'cluster' && this.opts.sans === sans && !this.stopping.signal.aborted) this.serve(c)
      },
      () => undefined,
    )
    return own
  }

  /** The certificate served once what start asked of the cluster is settled (at once when nothing is pending). */
  async servingSettled(): Promise<ServedCert | undefined> {
    await this.pending
    return this.cert
  }

  private serve(cert: ServedCert): void {
    this.cert = cert
    this.server?.setSecureContext({key: cert.key, cert: cert.cert, minVersion: 'TLSv1.2', ...(this.opts.clientCa ? {ca: this.opts.clientCa} : {})})
  }

  /**
   * The certificate for these names: the cluster-signed one kept or newly
   * issued (auto, csr), else the self-signed one, with one line saying which
   * and why. A cluster-signed one is renewed before it expires.
   */
  private async servingCert(sans: string[], useKept = true): Promise<ServedCert> {
    const source = this.opts.servingCert ?? {mode: 'self-signed'}
    const log = source.log ?? (() => undefined)
    if (source.mode !== 'self-signed' && source.api) {
      const kept = useKept ? await this.keptCert(sans) : undefined
      if (kept) return kept
      const waitMs = source.waitMs ?? (source.mode === 'csr' ? DefaultCsrWaitMs : DefaultAutoCsrWaitMs)
      const signal = this.stopping.signal
      const r = await requestServingCert({api: source.api, cluster: source.cluster ?? '', stateDir: this.opts.stateDir, nodeName: this.opts.nodeName, sans, waitMs, log, signal}).catch(
        (e: Error): {ok: false; why: string} => ({
          ok: false,
          why: `cannot request it: ${e.message}`,
        }),
      )
      if (signal.aborted) return this.selfSigned(sans)
      if (r.ok) {
        log(`serving certificate: issued by the cluster (CSR ${r.csrName}, signer ${KubeletServingSigner}) for ${sans.join(', ')}`)
        this.renewAt(Date.parse(new X509Certificate(r.cert).validTo), sans)
        return {cert: r.cert, key: r.key, signedBy: 'cluster'}
      }
      if (source.mode === 'csr') throw new UserError(`serving certificate: ${r.why} (--serving-cert auto would serve a self-signed one instead)`)
      log(`serving certificate: self-signed: ${r.why}; an API server that verifies kubelet certificates refuses it, and only kubectl logs --insecure-skip-tls-verify-backend gets through`)
    }
    return this.selfSigned(sans)
  }

  private async selfSigned(sans: string[]): Promise<ServedCert> {
    const own = await ensureServingCert(this.opts.stateDir, this.opts.nodeName, sans)
    return {cert: own.cert, key: own.key, signedBy: 'self'}
  }

  /** The cluster-signed certificate kept from an earlier run, when it covers these names and is not due for renewal. */
  private async keptCert(sans: string[]): Promise<ServedCert | undefined> {
    const kept = await keptClusterCert(this.opts.stateDir, this.opts.servingCert?.cluster ?? '', sans, DefaultServingRenewBeforeMs)
    if (!kept) return undefined
    this.renewAt(kept.validTo, sans)
    return {cert: kept.cert, key: kept.key, signedBy: 'cluster'}
  }

  /** Asks again for the names served once the certificate is within its renewal window. */
  private renewAt(validTo: number, sans: string[]): void {
    clearTimeout(this.renewal)
    const delay = Math.min(Math.max(validTo - DefaultServingRenewBeforeMs - Date.now(), 60_000), 2 ** 31 - 1)
    this.renewal = setTimeout(() => {
      if (!this.server || this.opts.sans.length !== sans.length) return
      void this.servingCert(sans)
        .then((c) => this.server && this.serve(c))
        .catch((e: Error) => this.opts.servingCert?.log?.(`serving certificate: cannot renew it: ${e.message}`))
    }, delay)
    this.renewal.unref()
  }

  /** Ends log streams, closes every connection, and stops listening. */
  async stop(): Promise<void> {
    clearTimeout(this.renewal)
    this.stopping.abort()
    await this.pending
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
