import {constants as zc, inflateRawSync} from 'node:zlib'
import {SpdyHeaderDictionary} from './dictionary.js'

/**
 * SPDY/3 framing (the "SPDY/3.1" upgrade the API server and kubectl speak to
 * a kubelet, served there by moby/spdystream): frame layout, the header
 * block format and its zlib compression primed with the SPDY dictionary.
 * Flow control is not implemented, as in spdystream: WINDOW_UPDATE frames
 * are parsed and ignored and none are sent.
 */

export const SpdyVersion = 3

export const FrameType = {
  SynStream: 1,
  SynReply: 2,
  RstStream: 3,
  Settings: 4,
  Ping: 6,
  GoAway: 7,
  Headers: 8,
  WindowUpdate: 9,
} as const

export const FlagFin = 0x01
export const FlagUnidirectional = 0x02

/** RST_STREAM status codes. */
export const RstStatus = {
  ProtocolError: 1,
  InvalidStream: 2,
  RefusedStream: 3,
  UnsupportedVersion: 4,
  Cancel: 5,
  InternalError: 6,
  FlowControlError: 7,
  StreamInUse: 8,
  StreamAlreadyClosed: 9,
} as const

export const GoAwayStatus = {Ok: 0, ProtocolError: 1, InternalError: 2} as const

/** The largest payload a frame's 24-bit length can carry. */
export const MaxFrameLength = 0xffffff
/**
 * The most a header block may inflate to (Go's http.DefaultMaxHeaderBytes).
 * Streams towards a kubelet carry a few short headers; without a bound a
 * small frame could inflate to gigabytes.
 */
export const DefaultMaxHeaderBlockBytes = 1 << 20
/**
 * The longest control frame accepted: a header block no larger than the
 * inflated bound (stored deflate blocks grow it by 5 bytes per 64 KiB), with
 * room for the frame's fixed fields. Checked before the frame is buffered.
 */
export const DefaultMaxControlFrameBytes = DefaultMaxHeaderBlockBytes + 4096

/** Header names are lowercase; a name may carry several values (NUL-separated on the wire). */
export type SpdyHeaders = Record<string, string[]>

export type Frame = {kind: 'data'; streamId: number; flags: number; data: Buffer} | {kind: 'control'; type: number; version: number; flags: number; payload: Buffer}

export class SpdyProtocolError extends Error {}

/** Incremental frame splitter: feed it socket chunks, take whole frames. */
export class FrameReader {
  private chunks: Buffer[] = []
  private length = 0

  constructor(private readonly maxControlFrameBytes = DefaultMaxControlFrameBytes) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.length += chunk.length
  }

  get buffered(): number {
    return this.length
  }

  /** The next whole frame, or undefined until more bytes arrive. */
  next(): Frame | undefined {
    if (this.length < 8) return undefined
    const head = this.peek(8)
    const size = head.readUInt32BE(4) & 0xffffff
    if (head[0] & 0x80 && size > this.maxControlFrameBytes) {
      throw new SpdyProtocolError(`control frame of ${size} bytes is over the limit of ${this.maxControlFrameBytes}`)
    }
    if (this.length < 8 + size) return undefined
    const whole = this.take(8 + size)
    const first = whole.readUInt32BE(0)
    const flags = whole[4]
    const payload = whole.subarray(8)
    if (first & 0x80000000) return {kind: 'control', version: (first >>> 16) & 0x7fff, type: first & 0xffff, flags, payload}
    return {kind: 'data', streamId: first & 0x7fffffff, flags, data: payload}
  }

  private peek(n: number): Buffer {
    if (this.chunks[0].length >= n) return this.chunks[0].subarray(0, n)
    const joined = Buffer.concat(this.chunks)
    this.chunks = [joined]
    return joined.subarray(0, n)
  }

  private take(n: number): Buffer {
    const joined = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks)
    const out = joined.subarray(0, n)
    const rest = joined.subarray(n)
    this.chunks = rest.length ? [rest] : []
    this.length -= n
    return out
  }
}

/** Adler-32 (RFC 1950), for the dictionary id in the zlib header. */
export function adler32(buf: Buffer): number {
  let a = 1
  let b = 0
  for (let i = 0; i < buf.length;) {
    const end = Math.min(buf.length, i + 3800)
    for (; i < end; i++) {
      a += buf[i]
      b += a
    }
    a %= 65521
    b %= 65521
  }
  return ((b << 16) | a) >>> 0
}

export const DictionaryId = adler32(SpdyHeaderDictionary)
const Window = 32 * 1024

/**
 * Decompresses the header blocks of one direction of a session. The peer
 * compresses all of them as one zlib stream, sync-flushed after each block,
 * so every block is a byte-aligned run of deflate blocks whose back
 * references reach into the previous 32 KiB of output (the dictionary at
 * first): a raw inflate of the block with that window as its dictionary.
 */
export class HeaderDecompressor {
  private history: Buffer = SpdyHeaderDictionary
  private started = false

  constructor(private readonly maxBlockBytes = DefaultMaxHeaderBlockBytes) {}

  decompress(block: Buffer): Buffer {
    let raw = block
    if (!this.started) {
      if (block.length < 6) throw new SpdyProtocolError('header block too short for a zlib header')
      const cmf = block[0]
      const flg = block[1]
      if ((cmf & 0x0f) !== 8 || cmf >> 4 > 7 || ((cmf << 8) | flg) % 31 !== 0) throw new SpdyProtocolError('invalid zlib header in header block')
      if (!(flg & 0x20)) throw new SpdyProtocolError('header block is not compressed with the SPDY dictionary')
      if (block.readUInt32BE(2) !== DictionaryId) throw new SpdyProtocolError('header block uses an unknown zlib dictionary')
      raw = block.subarray(6)
      this.started = true
    }
    let out: Buffer
    try {
      // Inflating stops at the bound: a block that would grow past it is refused, not held.
      out = raw.length === 0 ? Buffer.alloc(0) : inflateRawSync(raw, {dictionary: this.history, finishFlush: zc.Z_SYNC_FLUSH, maxOutputLength: this.maxBlockBytes})
    } catch (error) {
      if ((error as {code?: string}).code === 'ERR_BUFFER_TOO_LARGE') throw new SpdyProtocolError(`header block inflates past the limit of ${this.maxBlockBytes} bytes`)
      throw new SpdyProtocolError(`cannot decompress header block: ${(error as Error).message}`)
    }
    this.history = Buffer.concat([this.history, out]).subarray(-Window)
    return out
  }
}

/**
 * Compresses header blocks for one direction as one zlib stream of stored
 * (uncompressed) deflate blocks: valid zlib that any inflater accepts, with
 * no compressor state to keep. Header blocks here are a few bytes.
 */
const SyncMarker = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff])

export class HeaderCompressor {
  private started = false

  compress(raw: Buffer): Buffer {
    const parts: Buffer[] = []
    if (!this.started) {
      const head = Buffer.alloc(6)
      // CMF 0x78 (deflate, 32 KiB window), FLG 0xbb: FDICT set, check bits make the pair a multiple of 31.
      head[0] = 0x78
      head[1] = 0xbb
      head.writeUInt32BE(DictionaryId, 2)
      parts.push(head)
      this.started = true
    }
    let off = 0
    do {
      const piece = raw.subarray(off, off + 0xffff)
      const hdr = Buffer.alloc(5)
      hdr[0] = 0 // BFINAL 0, BTYPE 00 (stored): the stream stays byte-aligned
      hdr.writeUInt16LE(piece.length, 1)
      hdr.writeUInt16LE(~piece.length & 0xffff, 3)
      parts.push(hdr, piece)
      off += piece.length
    } while (off < raw.length)
    // The sync-flush marker (an empty stored block), as a zlib flush ends every block: an inflater
    // (Go's flate) hands out a stored block's data only when it reaches the next block header.
    parts.push(SyncMarker)
    return Buffer.concat(parts)
  }
}

/** Parses an uncompressed header block (32-bit counts and lengths, SPDY/3). */
export function parseHeaderBlock(buf: Buffer): SpdyHeaders {
  const headers: SpdyHeaders = {}
  let off = 0
  const u32 = () => {
    if (off + 4 > buf.length) throw new SpdyProtocolError('truncated header block')
    const v = buf.readUInt32BE(off)
    off += 4
    return v
  }
  const bytes = (n: number) => {
    if (off + n > buf.length) throw new SpdyProtocolError('truncated header block')
    const v = buf.subarray(off, off + n).toString('latin1')
    off += n
    return v
  }
  const count = u32()
  for (let i = 0; i < count; i++) {
    const name = bytes(u32()).toLowerCase()
    const value = bytes(u32())
    if (name === '') throw new SpdyProtocolError('empty header name')
    ;(headers[name] ??= []).push(...value.split('\0'))
  }
  return headers
}

export function encodeHeaderBlock(headers: SpdyHeaders): Buffer {
  const entries = Object.entries(headers)
  const parts: Buffer[] = [u32(entries.length)]
  for (const [name, values] of entries) {
    const n = Buffer.from(name.toLowerCase(), 'latin1')
    const v = Buffer.from(values.join('\0'), 'latin1')
    parts.push(u32(n.length), n, u32(v.length), v)
  }
  return Buffer.concat(parts)
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(v >>> 0)
  return b
}

function controlFrame(type: number, flags: number, payload: Buffer): Buffer {
  if (payload.length > MaxFrameLength) throw new RangeError('SPDY control frame too large')
  const head = Buffer.alloc(8)
  head.writeUInt16BE(0x8000 | SpdyVersion, 0)
  head.writeUInt16BE(type, 2)
  head.writeUInt32BE(((flags & 0xff) << 24) | payload.length, 4)
  return Buffer.concat([head, payload])
}

export function dataFrame(streamId: number, data: Buffer, fin = false): Buffer {
  if (data.length > MaxFrameLength) throw new RangeError('SPDY data frame too large')
  const head = Buffer.alloc(8)
  head.writeUInt32BE(streamId & 0x7fffffff, 0)
  head.writeUInt32BE((((fin ? FlagFin : 0) & 0xff) << 24) | data.length, 4)
  return Buffer.concat([head, data])
}

export function synReplyFrame(streamId: number, compressedHeaders: Buffer, fin = false): Buffer {
  return controlFrame(FrameType.SynReply, fin ? FlagFin : 0, Buffer.concat([u32(streamId & 0x7fffffff), compressedHeaders]))
}

export function synStreamFrame(streamId: number, compressedHeaders: Buffer, flags = 0, priority = 0): Buffer {
  const fixed = Buffer.alloc(10)
  fixed.writeUInt32BE(streamId & 0x7fffffff, 0)
  fixed.writeUInt32BE(0, 4)
  fixed[8] = (priority & 0x7) << 5
  fixed[9] = 0
  return controlFrame(FrameType.SynStream, flags, Buffer.concat([fixed, compressedHeaders]))
}

export function rstStreamFrame(streamId: number, status: number): Buffer {
  return controlFrame(FrameType.RstStream, 0, Buffer.concat([u32(streamId & 0x7fffffff), u32(status)]))
}

export function pingFrame(id: number): Buffer {
  return controlFrame(FrameType.Ping, 0, u32(id))
}

export function goAwayFrame(lastGoodStreamId: number, status: number): Buffer {
  return controlFrame(FrameType.GoAway, 0, Buffer.concat([u32(lastGoodStreamId & 0x7fffffff), u32(status)]))
}

/** The stream id of SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS and WINDOW_UPDATE payloads. */
export function controlStreamId(payload: Buffer): number {
  if (payload.length < 4) throw new SpdyProtocolError('truncated control frame')
  return payload.readUInt32BE(0) & 0x7fffffff
}
