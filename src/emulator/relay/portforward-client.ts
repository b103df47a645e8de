import type {KubeConfig} from '@kubernetes/client-node'
import {EventEmitter} from 'node:events'
import type {IncomingMessage} from 'node:http'
import {request, type RequestOptions} from 'node:https'
import type {Socket} from 'node:net'
import {Duplex} from 'node:stream'
import {
  controlStreamId,
  dataFrame,
  encodeHeaderBlock,
  FlagFin,
  FrameReader,
  FrameType,
  goAwayFrame,
  GoAwayStatus,
  HeaderCompressor,
  HeaderDecompressor,
  pingFrame,
  RstStatus,
  rstStreamFrame,
  SpdyProtocolError,
  synStreamFrame,
} from '../server/spdy/frames.js'

/**
 * The client side of `pods/portforward` through the API server, as kubectl
 * port-forward speaks it (SPDY/3.1, portforward.k8s.io): one upgraded
 * connection, and for each forwarded connection an error stream and a data
 * stream sharing a requestID. Every kubelet and API server speaks it (the
 * websocket protocols are newer and optional).
 */

export const PortForwardProtocol = 'portforward.k8s.io'

/** One forwarded connection: its bytes; an error the far side reported ends it with that error. */
export class ForwardStream extends Duplex {
  localClosed = false
  remoteClosed = false

  constructor(
    private readonly conn: PortForwardConnection,
    readonly id: number,
  ) {
    super({allowHalfOpen: true})
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.localClosed) return callback(new Error('stream closed'))
    let ok = true
    for (let off = 0; off < chunk.length; off += 32 * 1024) ok = this.conn.send(dataFrame(this.id, chunk.subarray(off, off + 32 * 1024)))
    if (ok) return callback()
    this.conn.whenDrained(() => callback())
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.localClosed) {
      this.localClosed = true
      this.conn.send(dataFrame(this.id, Buffer.alloc(0), true))
    }
    callback()
  }

  override _read(): void {
    this.conn.resumeFor(this)
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!(this.localClosed && this.remoteClosed)) this.conn.send(rstStreamFrame(this.id, RstStatus.Cancel))
    this.localClosed = this.remoteClosed = true
    this.conn.forget(this.id)
    callback(error)
  }

  receive(data: Buffer, fin: boolean): void {
    if (this.remoteClosed || this.destroyed) return
    if (data.length > 0 && !this.push(data)) this.conn.pauseFor(this)
    if (fin) {
      this.remoteClosed = true
      this.push(null)
    }
  }
}

export class PortForwardConnection extends EventEmitter<{close: []}> {
  private readonly reader = new FrameReader()
  private readonly inflate = new HeaderDecompressor()
  private readonly deflate = new HeaderCompressor()
  private readonly streams = new Map<number, ForwardStream>()
  private readonly replies = new Map<number, () => void>()
  private readonly held = new Set<ForwardStream>()
  private nextId = 1
  private nextRequest = 0
  closed = false

  constructor(private readonly socket: Socket) {
    super()
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', () => undefined)
    socket.on('close', () => this.onClose())
  }

  /**
   * Upgrades `POST .../pods/<pod>/portforward` on the kubeconfig's server,
   * with the kubeconfig's credentials. Rejects with the server's answer when
   * it does not switch protocols (403, 404, a pod that is not running).
   */
  static async open(kc: KubeConfig, namespace: string, pod: string, timeoutMs = 15_000): Promise<PortForwardConnection> {
    const cluster = kc.getCurrentCluster()
    if (!cluster) throw new Error('no current cluster in the kubeconfig')
    const base = new URL(cluster.server)
    const opts: RequestOptions = {
      method: 'POST',
      hostname: base.hostname.replace(/^\[|\]$/g, ''),
      port: base.port || 443,
      path: `${base.pathname.replace(/\/$/, '')}/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/portforward`,
      headers: {Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': PortForwardProtocol, 'Content-Length': '0'},
      timeout: timeoutMs,
      agent: false,
    }
    await kc.applyToHTTPSOptions(opts)
    return new Promise((resolve, reject) => {
      const req = request(opts)
      req.once('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
        req.setTimeout(0)
        socket.setTimeout(0)
        const conn = new PortForwardConnection(socket)
        if (head.length > 0) conn.onData(head)
        resolve(conn)
      })
      req.once('response', (res: IncomingMessage) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (body = (body + d).slice(0, 2000)))
        res.on('end', () => reject(new Error(`port-forward to ${namespace}/${pod}: ${res.statusCode} ${statusMessage(body)}`)))
      })
      req.once('timeout', () => req.destroy(new Error(`port-forward to ${namespace}/${pod}: no answer in ${timeoutMs} ms`)))
      req.once('error', reject)
      req.end()
    })
  }

  /**
   * A connection to the pod's port: the error stream (read for the far
   * side's error, which then ends the data stream with it) and the data
   * stream, returned once the far side replied to it.
   */
  async forward(port: number, timeoutMs = 10_000): Promise<ForwardStream> {
    if (this.closed) throw new Error('port-forward connection is closed')
    const requestId = String(this.nextRequest++)
    const error = this.open({streamtype: ['error'], port: [String(port)], requestid: [requestId]}, true)
    const data = this.open({streamtype: ['data'], port: [String(port)], requestid: [requestId]}, false)
    let message = ''
    error.setEncoding('utf8')
    error.on('data', (d: string) => (message += d))
    error.on('error', () => undefined)
    error.on('end', () => {
      if (message.trim() !== '') data.destroy(new Error(message.trim()))
    })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        data.destroy()
        reject(new Error(`port-forward: no reply to a stream in ${timeoutMs} ms`))
      }, timeoutMs)
      this.replies.set(data.id, () => {
        clearTimeout(timer)
        resolve()
      })
      data.once('close', () => {
        clearTimeout(timer)
        reject(new Error(message.trim() || 'port-forward stream closed before its reply'))
      })
    })
    return data
  }

  close(): void {
    if (this.closed) return
    this.send(goAwayFrame(0, GoAwayStatus.Ok))
    this.socket.end()
    setTimeout(() => this.socket.destroy(), 2000).unref()
  }

  destroy(): void {
    this.socket.destroy()
  }

  // ---- called by streams ----

  send(frame: Buffer): boolean {
    if (this.socket.destroyed || this.socket.writableEnded) return true
    return this.socket.write(frame)
  }

  whenDrained(callback: () => void): void {
    if (this.socket.destroyed || !this.socket.writableNeedDrain) return callback()
    const done = () => {
      this.socket.off('drain', done)
      this.socket.off('close', done)
      callback()
    }
    this.socket.on('drain', done)
    this.socket.on('close', done)
  }

  pauseFor(stream: ForwardStream): void {
    this.held.add(stream)
    this.socket.pause()
  }

  resumeFor(stream: ForwardStream): void {
    if (this.held.delete(stream) && this.held.size === 0 && !this.socket.destroyed) this.socket.resume()
  }

  forget(id: number): void {
    const s = this.streams.get(id)
    this.streams.delete(id)
    this.replies.delete(id)
    if (s) this.resumeFor(s)
  }

  // ---- the session ----

  private open(headers: Record<string, string[]>, fin: boolean): ForwardStream {
    const id = this.nextId
    this.nextId += 2
    const stream = new ForwardStream(this, id)
    // Errors end the stream; its users see them on 'close' (and may listen for 'error' too).
    stream.on('error', () => undefined)
    this.streams.set(id, stream)
    this.send(synStreamFrame(id, this.deflate.compress(encodeHeaderBlock(headers)), fin ? FlagFin : 0))
    if (fin) stream.localClosed = true
    return stream
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return
    this.reader.push(chunk)
    try {
      for (let f = this.reader.next(); f; f = this.reader.next()) {
        if (f.kind === 'data') this.streams.get(f.streamId)?.receive(f.data, (f.flags & FlagFin) !== 0)
        else this.onControl(f.type, f.flags, f.payload)
      }
    } catch (error) {
      if (!(error instanceof SpdyProtocolError)) throw error
      this.socket.destroy()
    }
  }

  private onControl(type: number, flags: number, payload: Buffer): void {
    switch (type) {
      case FrameType.SynReply: {
        const id = controlStreamId(payload)
        this.inflate.decompress(payload.subarray(4))
        this.replies.get(id)?.()
        this.replies.delete(id)
        if (flags & FlagFin) this.streams.get(id)?.receive(Buffer.alloc(0), true)
        return
      }
      case FrameType.Headers:
        this.inflate.decompress(payload.subarray(4))
        return
      case FrameType.SynStream:
        // The server opens no streams in port-forward; refuse any (its headers keep the inflater in step).
        this.inflate.decompress(payload.subarray(10))
        this.send(rstStreamFrame(controlStreamId(payload), RstStatus.RefusedStream))
        return
      case FrameType.RstStream: {
        const s = this.streams.get(controlStreamId(payload))
        if (s) {
          s.localClosed = s.remoteClosed = true
          s.destroy(new Error('stream reset by the server'))
        }
        return
      }
      case FrameType.Ping:
        if (payload.length >= 4 && payload.readUInt32BE(0) % 2 === 0) this.send(pingFrame(payload.readUInt32BE(0)))
        return
      case FrameType.GoAway:
        this.socket.end()
        return
      default:
        return
    }
  }

  private onClose(): void {
    if (this.closed) return
    this.closed = true
    for (const s of [...this.streams.values()]) {
      s.localClosed = s.remoteClosed = true
      s.destroy(new Error('port-forward connection closed'))
    }
    this.streams.clear()
    this.emit('close')
  }
}

/** The message of a Status body, else the body. */
function statusMessage(body: string): string {
  try {
    const s = JSON.parse(body) as {message?: string}
    if (s.message) return s.message
  } catch {
    // not JSON
  }
  return body.trim()
}
