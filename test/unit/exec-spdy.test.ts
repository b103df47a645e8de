import {afterEach, describe, expect, test} from '@jest/globals'
import {connect, createServer, type Server, type Socket} from 'node:net'
import {constants as zc, createDeflate, inflateSync} from 'node:zlib'
import {SpdyHeaderDictionary} from '../../src/emulator/server/spdy/dictionary.js'
import {
  adler32,
  dataFrame,
  DictionaryId,
  encodeHeaderBlock,
  FlagFin,
  type Frame,
  FrameReader,
  FrameType,
  GoAwayStatus,
  HeaderCompressor,
  HeaderDecompressor,
  parseHeaderBlock,
  pingFrame,
  RstStatus,
  rstStreamFrame,
  type SpdyHeaders,
  synStreamFrame,
} from '../../src/emulator/server/spdy/frames.js'
import {SpdySession, type SpdyStream} from '../../src/emulator/server/spdy/session.js'

/** A zlib stream with the SPDY dictionary, sync-flushed per block: what a Go (or any) SPDY peer sends. */
function peerCompressor() {
  const d = createDeflate({dictionary: SpdyHeaderDictionary})
  const out: Buffer[] = []
  d.on('data', (c: Buffer) => out.push(c))
  return (headers: SpdyHeaders) =>
    new Promise<Buffer>((resolve) => {
      out.length = 0
      d.write(encodeHeaderBlock(headers))
      d.flush(zc.Z_SYNC_FLUSH, () => resolve(Buffer.concat(out)))
    })
}

describe('SPDY header compression', () => {
  test('the dictionary is the SPDY/3 one: 1423 bytes whose Adler-32 is the id Go peers put in their zlib header', () => {
    expect(SpdyHeaderDictionary.length).toBe(1423)
    // 78 f9 e3 c6 a7 c2 began the first header block the API server sent in a captured exec.
    expect(DictionaryId).toBe(0xe3c6a7c2)
    expect(adler32(Buffer.from('Wikipedia'))).toBe(0x11e60398)
  })

  test('decompresses consecutive sync-flushed blocks of one stream, back references included', async () => {
    const compress = peerCompressor()
    const inflater = new HeaderDecompressor()
    const blocks: SpdyHeaders[] = [
      {streamtype: ['error'], port: ['8080'], requestid: ['0']},
      {streamtype: ['data'], port: ['8080'], requestid: ['0']},
      {streamtype: ['data'], port: ['8080'], requestid: ['1'], multi: ['a', 'b']},
    ]
    for (const h of blocks) expect(parseHeaderBlock(inflater.decompress(await compress(h)))).toEqual(h)
  })

  test('refuses a first block without the SPDY dictionary', () => {
    const plain = Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])
    expect(() => new HeaderDecompressor().decompress(plain)).toThrow(/SPDY dictionary/)
  })

  test('compressed blocks form one valid zlib stream, each ending at a sync-flush marker', () => {
    const c = new HeaderCompressor()
    const a = c.compress(encodeHeaderBlock({}))
    const b = c.compress(encodeHeaderBlock({status: ['200'], 'x-long': ['y'.repeat(70_000)]}))
    for (const blk of [a, b]) expect(blk.subarray(-5)).toEqual(Buffer.from([0, 0, 0, 0xff, 0xff]))
    const all = inflateSync(Buffer.concat([a, b]), {dictionary: SpdyHeaderDictionary, finishFlush: zc.Z_SYNC_FLUSH})
    expect(all).toEqual(Buffer.concat([encodeHeaderBlock({}), encodeHeaderBlock({status: ['200'], 'x-long': ['y'.repeat(70_000)]})]))
    // And our own decompressor reads it back block by block.
    const d = new HeaderDecompressor()
    expect(parseHeaderBlock(d.decompress(a))).toEqual({})
    expect(parseHeaderBlock(d.decompress(b)).status).toEqual(['200'])
  })

  test('a header block that inflates past the bound is a protocol error; one within it is read', async () => {
    const compress = peerCompressor()
    const inflater = new HeaderDecompressor(4096)
    const small = {streamtype: ['data'], x: ['a'.repeat(1000)]}
    expect(parseHeaderBlock(inflater.decompress(await compress(small)))).toEqual(small)
    expect(() => inflater.decompress(Buffer.alloc(0))).not.toThrow()
    const next = await compress({x: ['b'.repeat(5000)]})
    expect(() => inflater.decompress(next)).toThrow(/inflates past the limit of 4096 bytes/)
  })

  test('a truncated header block is a protocol error', () => {
    expect(() => parseHeaderBlock(Buffer.from([0, 0, 0, 1, 0, 0, 0, 9, 0x61]))).toThrow(/truncated/)
  })
})

describe('SPDY frames', () => {
  test('the reader splits frames however the bytes arrive', () => {
    const bytes = Buffer.concat([dataFrame(3, Buffer.from('hello')), pingFrame(7), dataFrame(5, Buffer.alloc(0), true)])
    for (const step of [1, 3, 7, bytes.length]) {
      const r = new FrameReader()
      const frames: Frame[] = []
      for (let i = 0; i < bytes.length; i += step) {
        r.push(bytes.subarray(i, i + step))
        for (let f = r.next(); f; f = r.next()) frames.push(f)
      }
      expect(frames).toEqual([
        {kind: 'data', streamId: 3, flags: 0, data: Buffer.from('hello')},
        {kind: 'control', type: FrameType.Ping, version: 3, flags: 0, payload: Buffer.from([0, 0, 0, 7])},
        {kind: 'data', streamId: 5, flags: FlagFin, data: Buffer.alloc(0)},
      ])
    }
  })

  test('control frames carry version 3, type, flags and length as spdystream writes them', () => {
    expect(rstStreamFrame(5, RstStatus.Cancel).toString('hex')).toBe('8003000300000008' + '00000005' + '00000005')
    expect(dataFrame(1, Buffer.from('x'), true).toString('hex')).toBe('00000001' + '01000001' + '78')
  })
})

describe('SPDY session (server side) over TCP', () => {
  let server: Server | undefined
  const sockets: Socket[] = []
  afterEach(async () => {
    for (const s of sockets) s.destroy()
    sockets.length = 0
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()))
    server = undefined
  })

  async function pair(onStream: (s: SpdyStream) => boolean) {
    let session!: SpdySession
    server = createServer((sock) => {
      sockets.push(sock)
      session = new SpdySession(sock, Buffer.alloc(0), {onStream, closeGraceMs: 1000})
    })
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()))
    const port = (server.address() as {port: number}).port
    const client = connect(port, '127.0.0.1')
    sockets.push(client)
    await new Promise((r) => client.once('connect', r))
    const reader = new FrameReader()
    const frames: Frame[] = []
    client.on('data', (c: Buffer) => {
      reader.push(c)
      for (let f = reader.next(); f; f = reader.next()) frames.push(f)
    })
    const waitFrame = async (pred: (f: Frame) => boolean) => {
      for (let i = 0; i < 200; i++) {
        const f = frames.find(pred)
        if (f) return f
        await new Promise((r) => setTimeout(r, 10))
      }
      throw new Error(`no such frame; got ${JSON.stringify(frames.map((f) => (f.kind === 'data' ? ['data', f.streamId, f.flags] : ['ctl', f.type, f.flags])))}`)
    }
    return {client, frames, waitFrame, session: () => session, compress: peerCompressor()}
  }

  test('replies to streams, carries data both ways with FIN, echoes client pings, ends with GOAWAY', async () => {
    const got: string[] = []
    const p = await pair((s) => {
      s.setEncoding('utf8')
      s.on('data', (d: string) => got.push(`${s.header('streamtype')}:${d}`))
      s.on('end', () => {
        got.push(`${s.header('streamtype')}:end`)
        s.end(`echo ${s.header('streamtype')}`)
      })
      return true
    })
    p.client.write(synStreamFrame(1, await p.compress({streamtype: ['stdin']})))
    const reply = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.SynReply)
    expect(reply.kind === 'control' && reply.flags).toBe(0)
    p.client.write(dataFrame(1, Buffer.from('hi')))
    p.client.write(dataFrame(1, Buffer.alloc(0), true))
    p.client.write(pingFrame(9))
    await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.Ping)
    const echoed = await p.waitFrame((f) => f.kind === 'data' && f.streamId === 1 && f.data.length > 0)
    expect(echoed.kind === 'data' && echoed.data.toString()).toBe('echo stdin')
    await p.waitFrame((f) => f.kind === 'data' && f.streamId === 1 && (f.flags & FlagFin) !== 0)
    expect(got).toEqual(['stdin:hi', 'stdin:end'])
    expect(p.session().activeStreams).toBe(0)
    const closed = new Promise((r) => p.client.once('end', r))
    p.session().close()
    await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.GoAway)
    await closed
  })

  test('a refused stream gets a SYN_REPLY with FIN; a reset stream is destroyed; even stream ids are refused', async () => {
    const resets: number[] = []
    const p = await pair((s) => {
      s.on('reset', () => resets.push(s.id))
      return s.header('streamtype') !== 'bogus'
    })
    p.client.write(synStreamFrame(1, await p.compress({streamtype: ['bogus']})))
    const refused = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.SynReply)
    expect(refused.kind === 'control' && refused.flags & FlagFin).toBe(FlagFin)
    p.client.write(synStreamFrame(3, await p.compress({streamtype: ['data']})))
    p.client.write(rstStreamFrame(3, RstStatus.Cancel))
    p.client.write(synStreamFrame(4, await p.compress({streamtype: ['data']})))
    const rst = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.RstStream)
    expect(rst.kind === 'control' && rst.payload.readUInt32BE(0)).toBe(4)
    for (let i = 0; i < 100 && resets.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
    expect(resets).toEqual([3])
    expect(p.session().activeStreams).toBe(0)
  })

  test('a header block that inflates past the bound ends the session with GOAWAY (protocol error), the stream never opened', async () => {
    const opened: number[] = []
    const p = await pair((s) => (opened.push(s.id), true))
    const closed = new Promise((r) => p.client.once('close', r))
    // 2 MiB of header value compresses to a few KiB: a small frame, a large inflate.
    const bomb = await p.compress({streamtype: ['data'], x: ['a'.repeat(2 << 20)]})
    expect(bomb.length).toBeLessThan(16 * 1024)
    p.client.write(synStreamFrame(1, bomb))
    const away = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.GoAway)
    expect(away.kind === 'control' && away.payload.readUInt32BE(4)).toBe(GoAwayStatus.ProtocolError)
    await closed
    expect(opened).toEqual([])
    expect(p.frames.filter((f) => f.kind === 'control' && f.type === FrameType.GoAway)).toHaveLength(1)
  })

  test('a control frame whose length is over the bound is a protocol error at once, before its body arrives', async () => {
    const p = await pair(() => true)
    const closed = new Promise((r) => p.client.once('close', r))
    // A SYN_STREAM header claiming 16 MiB - 1 of payload, and only the first bytes of it.
    const head = Buffer.from([0x80, 0x03, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff])
    p.client.write(Buffer.concat([head, Buffer.alloc(64)]))
    const away = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.GoAway)
    expect(away.kind === 'control' && away.payload.readUInt32BE(4)).toBe(GoAwayStatus.ProtocolError)
    await closed
  })

  test('streams over the per-connection bound are refused (RST_STREAM REFUSED_STREAM); once one ends, a new one opens', async () => {
    const open: SpdyStream[] = []
    let session!: SpdySession
    server = createServer((sock) => {
      sockets.push(sock)
      session = new SpdySession(sock, Buffer.alloc(0), {onStream: (s) => (open.push(s), true), maxStreams: 2, closeGraceMs: 1000})
    })
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()))
    const client = connect((server.address() as {port: number}).port, '127.0.0.1')
    sockets.push(client)
    const reader = new FrameReader()
    const frames: Frame[] = []
    client.on('data', (c: Buffer) => {
      reader.push(c)
      for (let f = reader.next(); f; f = reader.next()) frames.push(f)
    })
    const compress = peerCompressor()
    const until = async (pred: () => boolean) => {
      for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 10))
      expect(pred()).toBe(true)
    }
    const replies = () => frames.filter((f) => f.kind === 'control' && f.type === FrameType.SynReply).map((f) => (f.kind === 'control' ? f.payload.readUInt32BE(0) : 0))
    const rsts = () => frames.filter((f) => f.kind === 'control' && f.type === FrameType.RstStream).map((f) => (f.kind === 'control' ? [f.payload.readUInt32BE(0), f.payload.readUInt32BE(4)] : []))
    for (const id of [1, 3, 5]) client.write(synStreamFrame(id, await compress({streamtype: ['data']})))
    await until(() => replies().length === 2 && rsts().length === 1)
    expect(replies()).toEqual([1, 3])
    expect(rsts()).toEqual([[5, RstStatus.RefusedStream]])
    expect(session.activeStreams).toBe(2)
    // Stream 1 ends both ways; the next stream fits.
    open[0].end()
    client.write(dataFrame(1, Buffer.alloc(0), true))
    open[0].resume()
    await until(() => session.activeStreams === 1)
    client.write(synStreamFrame(7, await compress({streamtype: ['data']})))
    await until(() => replies().length === 3)
    expect(replies()).toEqual([1, 3, 7])
    expect(session.closed).toBe(false)
  })

  test('a header block that is not SPDY zlib ends the session with GOAWAY (protocol error)', async () => {
    const p = await pair(() => true)
    const closed = new Promise((r) => p.client.once('close', r))
    p.client.write(synStreamFrame(1, Buffer.from('not zlib at all')))
    const away = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.GoAway)
    expect(away.kind === 'control' && away.payload.readUInt32BE(4)).toBe(1)
    await closed
  })
})
