import {connect, createServer, type Server, type Socket} from 'node:net'

/**
 * A TCP proxy on 127.0.0.1 in front of one target, that a test can cut
 * (every connection destroyed, new ones refused: nothing listens) and
 * restore (listening again on the same port). Bytes pass through untouched,
 * so TLS is end to end: the client must trust the target's certificate for
 * 127.0.0.1.
 */
export class TcpProxy {
  private server: Server | undefined
  private readonly sockets = new Set<Socket>()
  /** The proxy's port (0 until started; kept across cut and restore). */
  port = 0
  /** Connections accepted since start: a bound on how many requests went through. */
  accepted = 0

  constructor(
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  get isCut(): boolean {
    return this.server === undefined
  }

  async start(): Promise<void> {
    await this.listen(0)
  }

  /** Destroys every connection in both directions and stops listening, so new ones are refused. */
  async cut(): Promise<void> {
    const server = this.server
    this.server = undefined
    for (const s of this.sockets) s.destroy()
    this.sockets.clear()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /** Listens again on the same port. */
  async restore(): Promise<void> {
    if (this.server) return
    await this.listen(this.port)
  }

  async close(): Promise<void> {
    await this.cut()
  }

  private listen(port: number): Promise<void> {
    const server = createServer((client) => this.accept(client))
    return new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject)
        this.server = server
        this.port = (server.address() as {port: number}).port
        resolve()
      })
    })
  }

  private accept(client: Socket): void {
    this.accepted++
    const upstream = connect(this.targetPort, this.targetHost)
    for (const s of [client, upstream]) {
      this.sockets.add(s)
      // Either side failing or closing ends the pair: a half-open pipe would hide a cut.
      s.on('error', () => undefined)
      s.on('close', () => {
        this.sockets.delete(s)
        client.destroy()
        upstream.destroy()
      })
    }
    client.pipe(upstream)
    upstream.pipe(client)
  }
}
