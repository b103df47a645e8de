import {createServer, type Server, type Socket} from 'node:net'
import {PortForwardConnection} from '../../emulator/relay/portforward-client.js'
import {UserError} from '../../errors.js'
import type {KubeSession} from '../session.js'

/** One --port: localhost's port to the pod's. */
export interface PortMapping {
  local: number
  pod: number
}

/** `LOCAL:POD`, or `PORT` for the same number on both sides (kubectl port-forward's forms). */
export function parsePortMapping(text: string): PortMapping {
  const m = /^(\d{1,5})(?::(\d{1,5}))?$/.exec(text)
  const local = m ? Number(m[1]) : NaN
  const pod = m ? Number(m[2] ?? m[1]) : NaN
  if (!(local >= 1 && local <= 65535 && pod >= 1 && pod <= 65535)) throw new UserError(`invalid --port "${text}": expected LOCAL:POD (e.g. 9229:9229) or PORT, ports 1-65535`)
  return {local, pod}
}

/**
 * Local listeners on 127.0.0.1 that carry each connection to the pod
 * through the API server's pods/portforward, as kubectl port-forward does
 * (one SPDY connection, a stream pair per TCP connection). The listeners
 * are bound before the pod exists, so a port in use fails dev with nothing
 * created; the connection to the pod is opened on the first use and again
 * after it drops (a restart of the node's kubelet API, the pod's restart).
 */
export class PortForwarder {
  private readonly servers: Server[] = []
  private conn: Promise<PortForwardConnection> | undefined
  private target: {namespace: string; pod: string} | undefined
  private readonly sockets = new Set<Socket>()

  constructor(
    private readonly session: KubeSession,
    private readonly mappings: PortMapping[],
    private readonly onError: (message: string) => void,
  ) {}

  /** Binds every local port, or none: the first that is in use is the error. */
  async listen(): Promise<void> {
    try {
      for (const m of this.mappings) this.servers.push(await this.bind(m))
    } catch (error) {
      this.close()
      throw error
    }
  }

  /** From now on connections go to this pod. */
  forwardTo(namespace: string, pod: string): void {
    this.target = {namespace, pod}
  }

  close(): void {
    for (const s of this.servers) s.close()
    for (const s of this.sockets) s.destroy()
    void this.conn?.then((c) => c.close()).catch(() => undefined)
    this.conn = undefined
  }

  private bind(m: PortMapping): Promise<Server> {
    const server = createServer((socket) => void this.carry(socket, m))
    return new Promise((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) =>
        reject(new UserError(`cannot listen on 127.0.0.1:${m.local} for --port ${m.local}:${m.pod}: ${e.code === 'EADDRINUSE' ? 'the port is in use' : e.message}`)),
      )
      server.listen(m.local, '127.0.0.1', () => resolve(server))
    })
  }

  private connection(): Promise<PortForwardConnection> {
    const t = this.target
    if (!t) return Promise.reject(new Error('the dev pod is not running yet'))
    if (!this.conn) {
      const opening = PortForwardConnection.open(this.session.kc, t.namespace, t.pod)
      this.conn = opening
      opening.then(
        (c) => c.once('close', () => this.conn === opening && (this.conn = undefined)),
        () => this.conn === opening && (this.conn = undefined),
      )
    }
    return this.conn
  }

  private async carry(socket: Socket, m: PortMapping): Promise<void> {
    this.sockets.add(socket)
    socket.once('close', () => this.sockets.delete(socket))
    socket.on('error', () => undefined)
    try {
      const stream = await (await this.connection()).forward(m.pod)
      stream.on('error', (e: Error) => {
        this.onError(`port ${m.local} -> ${m.pod}: ${e.message}`)
        socket.destroy()
      })
      socket.once('close', () => stream.destroy())
      stream.once('close', () => socket.end())
      socket.pipe(stream).pipe(socket)
    } catch (error) {
      this.onError(`port ${m.local} -> ${m.pod}: ${(error as Error).message}`)
      socket.destroy()
    }
  }
}
