import {EventEmitter} from 'node:events'
import type {Socket} from 'node:net'
import {Duplex} from 'node:stream'
import {
  controlStreamId,
  dataFrame,
  encodeHeaderBlock,
  FlagFin,
  FlagUnidirectional,
  FrameReader,
  FrameType,
  goAwayFrame,
  GoAwayStatus,
  HeaderCompressor,
  HeaderDecompressor,
  parseHeaderBlock,
  pingFrame,
  RstStatus,
  rstStreamFrame,
  type SpdyHeaders,
  SpdyProtocolError,
  SpdyVersion,
  synReplyFrame,
} from './frames.js'

/**
 * The server side of a SPDY/3 session on an upgraded connection, with the
 * behaviour of moby/spdystream (what the kubelet uses): the peer opens the
 * streams, each is answered with a SYN_REPLY, pings are echoed, no flow
 * control. Incoming data is held back per session (the socket is paused)
 * while a stream's reader is full, so memory stays bounded.
 */

/** Data frames are cut at this size so one stream cannot hog the connection. */
export const DefaultMaxDataFrameBytes = 32 * 1024
/** How much a stream buffers for a slow reader before the whole session pauses. */
export const DefaultStreamBufferBytes = 256 * 1024
/** After GOAWAY, how long the peer has to close the connection before it is cut. */
export const DefaultCloseGraceMs = 5_000
/** The kubelet's streamingConnectionIdleTimeout. */
export const DefaultStreamIdleTimeoutMs = 4 * 3600_000
/**
 * Streams open at once on one connection (Go's HTTP/2 server default). An exec
 * uses up to five, a port-forward two per forwarded connection.
 */
export const DefaultMaxStreamsPerConnection = 250

export interface SpdySessionOptions {
  /** A new stream from the peer; return false to refuse it (a SYN_REPLY with FIN). */
  onStream: (stream: SpdyStream) => boolean
  idleTimeoutMs?: number
  closeGraceMs?: number
  /** Streams open at once; one more is refused (RST_STREAM REFUSED_STREAM), the session goes on. */
  maxStreams?: number
  /** Bounds of what the peer sends: an inflated header block, a control frame. Over them the session ends with GOAWAY PROTOCOL_ERROR. */
  maxHeaderBlockBytes?: number
  maxControlFrameBytes?: number
}

export class SpdyStream extends Duplex {
  localClosed = false
  remoteClosed = false
  wasReset = false

  constructor(
    private readonly session: SpdySession,
    readonly id: number,
    readonly headers: SpdyHeaders,
  ) {
    super({readableHighWaterMark: DefaultStreamBufferBytes, allowHalfOpen: true})
  }

  /** The first value of a header (names are lowercase). */
  header(name: string): string | undefined {
    return this.headers[name.toLowerCase()]?.[0]
  }

  /** RST_STREAM (CANCEL by default): both directions end at once. */
  reset(status: number = RstStatus.Cancel): void {
    if (!this.wasReset && !(this.localClosed && this.remoteClosed)) this.session.send(rstStreamFrame(this.id, status))
    this.wasReset = true
    this.localClosed = true
    this.destroy()
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.localClosed) return callback(new Error(`stream ${this.id} is closed`))
    let ok = true
    for (let off = 0; off < chunk.length; off += DefaultMaxDataFrameBytes) {
      ok = this.session.send(dataFrame(this.id, chunk.subarray(off, off + DefaultMaxDataFrameBytes)))
    }
    if (ok) return callback()
    this.session.whenDrained(() => callback())
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.localClosed) {
      this.localClosed = true
      this.session.send(dataFrame(this.id, Buffer.alloc(0), true))
    }
    callback()
    this.session.settle(this)
  }

  override _read(): void {
    this.session.release(this)
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.session.forget(this)
    callback(error)
  }

  /** Data or FIN from the peer. */
  receive(data: Buffer, fin: boolean): void {
    if (this.remoteClosed || this.destroyed) return
    if (data.length > 0 && !this.push(data)) this.session.hold(this)
    if (fin) {
      this.remoteClosed = true
      this.push(null)
      this.session.settle(this)
    }
  }

  /** RST_STREAM from the peer. */
  peerReset(): void {
    this.wasReset = true
    this.localClosed = true
    this.remoteClosed = true
    this.emit('reset')
    this.destroy()
  }
}

export class SpdySession extends EventEmitter<{close: []}> {
  private readonly reader: FrameReader
  private readonly inflate: HeaderDecompressor
  private readonly deflate = new HeaderCompressor()
  private readonly streams = new Map<number, SpdyStream>()
  private readonly full = new Set<SpdyStream>()
  private lastStreamId = 0
  private goingAway = false
  private failed = false
  private closeTimer: NodeJS.Timeout | undefined
  closed = false

  constructor(
    private readonly socket: Socket,
    head: Buffer,
    private readonly opts: SpdySessionOptions,
  ) {
    super()
    this.reader = new FrameReader(opts.maxControlFrameBytes)
    this.inflate = new HeaderDecompressor(opts.maxHeaderBlockBytes)
    socket.setNoDelay(true)
    socket.setTimeout(opts.idleTimeoutMs ?? DefaultStreamIdleTimeoutMs, () => socket.destroy())
    socket.on('error', () => undefined)
    socket.on('close', () => this.onClose())
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    if (head.length > 0) queueMicrotask(() => this.onData(head))
  }

  get activeStreams(): number {
    return this.streams.size
  }

  /** Writes raw frames; false when the socket is full (see whenDrained). */
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

  /** GOAWAY, then the connection is ended; cut after a grace if the peer keeps it open. */
  close(): void {
    if (this.closed || this.goingAway) return
    this.goingAway = true
    this.send(goAwayFrame(this.lastStreamId, GoAwayStatus.Ok))
    this.socket.end()
    this.closeTimer = setTimeout(() => this.socket.destroy(), this.opts.closeGraceMs ?? DefaultCloseGraceMs)
  }

  destroy(): void {
    this.socket.destroy()
  }

  // ---- called by streams ----

  hold(stream: SpdyStream): void {
    this.full.add(stream)
    this.socket.pause()
  }

  release(stream: SpdyStream): void {
    if (!this.full.delete(stream)) return
    if (this.full.size === 0 && !this.socket.destroyed) this.socket.resume()
  }

  /** A stream closed both ways is forgotten (its data is still readable). */
  settle(stream: SpdyStream): void {
    if (stream.localClosed && stream.remoteClosed) this.streams.delete(stream.id)
  }

  forget(stream: SpdyStream): void {
    this.streams.delete(stream.id)
    this.release(stream)
  }

  // ---- incoming ----

  private onData(chunk: Buffer): void {
    if (this.closed || this.failed) return
    this.reader.push(chunk)
    try {
      for (let f = this.reader.next(); f; f = this.reader.next()) {
        if (f.kind === 'data') this.onDataFrame(f.streamId, f.flags, f.data)
        else this.onControl(f.type, f.version, f.flags, f.payload)
        if (this.closed) return
      }
    } catch (error) {
      if (!(error instanceof SpdyProtocolError)) throw error
      // One GOAWAY; whatever else the peer sends is not read.
      this.failed = true
      this.send(goAwayFrame(this.lastStreamId, GoAwayStatus.ProtocolError))
      this.socket.end()
      this.socket.destroySoon()
    }
  }

  private onDataFrame(id: number, flags: number, data: Buffer): void {
    this.streams.get(id)?.receive(data, (flags & FlagFin) !== 0)
  }

  private onControl(type: number, version: number, flags: number, payload: Buffer): void {
    if (version !== SpdyVersion) throw new SpdyProtocolError(`unsupported SPDY version ${version}`)
    switch (type) {
      case FrameType.SynStream:
        return this.onSynStream(flags, payload)
      case FrameType.SynReply:
      case FrameType.Headers:
        // Not used by a client towards a kubelet, but the header stream must stay in step.
        this.inflate.decompress(payload.subarray(4))
        return
      case FrameType.RstStream:
        return this.streams.get(controlStreamId(payload))?.peerReset()
      case FrameType.Ping: {
        if (payload.length < 4) throw new SpdyProtocolError('truncated PING')
        const id = payload.readUInt32BE(0)
        // Pings with odd ids come from the client; echo them (our own would be even).
        if (id % 2 === 1) this.send(pingFrame(id))
        return
      }
      case FrameType.GoAway:
        // The peer opens no more streams; the open ones finish normally.
        return
      default:
        // SETTINGS, WINDOW_UPDATE (no flow control, as spdystream) and unknown types are ignored.
        return
    }
  }

  private onSynStream(flags: number, payload: Buffer): void {
    if (payload.length < 10) throw new SpdyProtocolError('truncated SYN_STREAM')
    const id = controlStreamId(payload)
    const headers = parseHeaderBlock(this.inflate.decompress(payload.subarray(10)))
    if (id === 0 || id % 2 === 0 || id <= this.lastStreamId) {
      this.send(rstStreamFrame(id, RstStatus.ProtocolError))
      return
    }
    this.lastStreamId = id
    // Over the limit, the SPDY/3 answer is REFUSED_STREAM: the peer may retry once a stream ends.
    if (this.goingAway || this.streams.size >= (this.opts.maxStreams ?? DefaultMaxStreamsPerConnection)) {
      this.send(rstStreamFrame(id, RstStatus.RefusedStream))
      return
    }
    const stream = new SpdyStream(this, id, headers)
    this.streams.set(id, stream)
    if (flags & FlagUnidirectional) stream.localClosed = true
    let accepted: boolean
    try {
      accepted = this.opts.onStream(stream)
    } catch {
      accepted = false
    }
    this.send(synReplyFrame(id, this.deflate.compress(encodeHeaderBlock({})), !accepted))
    if (!accepted) {
      stream.localClosed = true
      stream.destroy()
      return
    }
    if (flags & FlagFin) stream.receive(Buffer.alloc(0), true)
  }

  private onClose(): void {
    if (this.closed) return
    this.closed = true
    clearTimeout(this.closeTimer)
    for (const s of [...this.streams.values()]) {
      s.localClosed = true
      s.remoteClosed = true
      s.destroy()
    }
    this.streams.clear()
    this.full.clear()
    this.emit('close')
  }
}
