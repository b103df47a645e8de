import {afterEach, describe, expect, test} from '@jest/globals'
import {connect, createServer, type Server, type Socket} from 'node:net'
import {constants as zc, createDeflate, inflateSync} from 'node:zlib'
import {SpdyHeaderDictionary} from '../../src/emulator/server/streaming/spdy-dictionary.js'
import {
  adler32,
  dataFrame,
  DictionaryId,
  encodeHeaderBlock,
  FlagFin,
  type Frame,
  FrameReader,
  FrameType,
  HeaderCompressor,
  HeaderDecompressor,
  parseHeaderBlock,
  pingFrame,
  RstStatus,
  rstStreamFrame,
  type SpdyHeaders,
  synStreamFrame,
} from '../../src/emulator/server/streaming/spdy-frames.js'
import {SpdySession, type SpdyStream} from '../../src/emulator/server/streaming/spdy-session.js'

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

  test('a header block that is not SPDY zlib ends the session with GOAWAY (protocol error)', async () => {
    const p = await pair(() => true)
    const closed = new Promise((r) => p.client.once('close', r))
    p.client.write(synStreamFrame(1, Buffer.from('not zlib at all')))
    const away = await p.waitFrame((f) => f.kind === 'control' && f.type === FrameType.GoAway)
    expect(away.kind === 'control' && away.payload.readUInt32BE(4)).toBe(1)
    await closed
  })
})
