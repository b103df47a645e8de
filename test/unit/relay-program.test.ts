import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {connect, type Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {freePort} from '../../src/common/ports.js'
import {RelayProgram, RelayProgramKey} from '../../src/emulator/relay/relay-program.js'

/**
 * The relay's pairing, run as the relay pod runs it: the ConfigMap's text
 * itself, with this host's python3, on loopback ports.
 */

function hasPython(): boolean {
  try {
    execFileSync('python3', ['-c', 'import asyncio'], {stdio: 'ignore'})
    return true
  } catch {
    return false
  }
}

const python = hasPython()
const when = python || process.env.CI === 'true' ? test : test.skip
const Ping = 0x00
const Go = 0x01

let dir = ''
let child: ChildProcess | undefined
let publicPort = 0
let tunnelPort = 0

/** A connection and everything it has received. */
class Conn {
  readonly sock: Socket
  received = Buffer.alloc(0)
  ended = false
  closed = false
  error: NodeJS.ErrnoException | undefined
  private waiters: Array<() => void> = []

  constructor(port: number) {
    this.sock = connect({host: '127.0.0.1', port, allowHalfOpen: true})
    this.sock.on('data', (d: Buffer) => {
      this.received = Buffer.concat([this.received, d])
      this.wake()
    })
    this.sock.on('end', () => {
      this.ended = true
      this.wake()
    })
    this.sock.on('error', (e: NodeJS.ErrnoException) => {
      this.error = e
    })
    this.sock.on('close', () => {
      this.closed = true
      this.wake()
    })
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w()
  }

  async until(what: string, cond: () => boolean, ms = 3000): Promise<void> {
    const deadline = Date.now() + ms
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; received ${JSON.stringify(this.received.toString('latin1'))}`)
      await new Promise<void>((r) => {
        this.waiters.push(r)
        setTimeout(r, 50)
      })
    }
  }

  connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.sock.connecting) return resolve()
      this.sock.once('connect', () => resolve())
      this.sock.once('error', reject)
    })
  }
}

/** A tunnel as vnode opens one: connected, and its first PING seen (the relay has it in its pool). */
async function tunnel(): Promise<Conn> {
  const t = new Conn(tunnelPort)
  await t.until('the first PING', () => t.received.length > 0)
  expect(t.received[0]).toBe(Ping)
  return t
}

/** The bytes after GO, once GO arrived. */
function afterGo(t: Conn): Buffer | undefined {
  const i = t.received.indexOf(Go)
  return i < 0 ? undefined : t.received.subarray(i + 1)
}

beforeAll(async () => {
  if (!python) return
  dir = mkdtempSync(join(tmpdir(), 'vnode-relay-'))
  const program = join(dir, RelayProgramKey)
  writeFileSync(program, RelayProgram)
  publicPort = await freePort()
  tunnelPort = await freePort()
  child = spawn('python3', [program], {
    env: {PATH: process.env.PATH, VNODE_RELAY_HOST: '127.0.0.1', VNODE_RELAY_PORT: String(publicPort), VNODE_RELAY_TUNNEL_PORT: String(tunnelPort), VNODE_RELAY_PING_SECONDS: '0.2'},
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child!.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('vnode relay: public')) resolve()
    })
    child!.once('exit', (code) => reject(new Error(`relay exited ${code}: ${out}`)))
  })
})

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once('exit', r))
    child.kill('SIGTERM')
    await exited
  }
  if (dir) rmSync(dir, {recursive: true, force: true})
})

describe('the relay program (the ConfigMap text, run by python3)', () => {
  if (!python && process.env.CI === 'true') test('python3 is required', () => expect('python3 with asyncio on PATH').toBe('available'))

  when('a connection with no idle tunnel is reset at once, not queued', async () => {
    const started = Date.now()
    const c = new Conn(publicPort)
    await c.until('the close', () => c.closed)
    expect(c.error?.code).toBe('ECONNRESET')
    expect(c.received.length).toBe(0)
    expect(Date.now() - started).toBeLessThan(1000)
  })

  when('an idle tunnel gets PINGs, then GO and the connection bytes both ways; an end crosses over', async () => {
    const t = await tunnel()
    await t.until('a second PING', () => t.received.length >= 2)
    expect([...t.received].every((b) => b === Ping)).toBe(true)
    const c = new Conn(publicPort)
    await c.connected()
    c.sock.write('hello from the API server')
    await t.until('GO and the bytes', () => afterGo(t)?.toString() === 'hello from the API server')
    t.sock.write('hello from vnode')
    await c.until('the answer', () => c.received.toString() === 'hello from vnode')
    // No PING after GO: the stream is the connection's alone.
    await new Promise((r) => setTimeout(r, 500))
    expect(afterGo(t)?.toString()).toBe('hello from the API server')
    // vnode's side ends: the public connection ends, and both close.
    t.sock.end()
    await c.until('the end', () => c.ended)
    c.sock.end()
    await t.until('the tunnel closed', () => t.closed)
    await c.until('the connection closed', () => c.closed)
  })

  when('each connection takes its own tunnel; with the pool empty the next one is reset', async () => {
    const [t1, t2] = [await tunnel(), await tunnel()]
    const a = new Conn(publicPort)
    const b = new Conn(publicPort)
    await Promise.all([a.connected(), b.connected()])
    a.sock.write('A')
    b.sock.write('B')
    const got = () => [afterGo(t1)?.toString(), afterGo(t2)?.toString()].sort()
    await t1.until('both paired', () => got().join() === 'A,B')
    const refused = new Conn(publicPort)
    await refused.until('the reset', () => refused.closed)
    expect(refused.error?.code).toBe('ECONNRESET')
    // The paired ones are unaffected.
    const [ta] = afterGo(t1)?.toString() === 'A' ? [t1] : [t2]
    ta.sock.write('to A')
    await a.until('its answer', () => a.received.toString() === 'to A')
    // The API server's side ends: the end crosses, vnode ends its side (as it does when its kubelet connection closes), all close.
    for (const c of [a, b]) c.sock.end()
    for (const t of [t1, t2]) {
      await t.until('the end', () => t.ended)
      t.sock.end()
    }
    await t1.until('t1 closed', () => t1.closed)
    await t2.until('t2 closed', () => t2.closed)
  })

  when('a tunnel vnode closed while idle leaves the pool: the next connection is reset, not paired with it', async () => {
    const t = await tunnel()
    t.sock.destroy()
    await new Promise((r) => setTimeout(r, 300))
    const c = new Conn(publicPort)
    await c.until('the reset', () => c.closed)
    expect(c.error?.code).toBe('ECONNRESET')
  })

  when('a large transfer crosses intact both ways', async () => {
    const t = await tunnel()
    const c = new Conn(publicPort)
    await c.connected()
    const big = Buffer.alloc(3 * 1024 * 1024, 7)
    c.sock.write(Buffer.from('x'))
    await t.until('GO', () => afterGo(t) !== undefined)
    t.sock.end(big)
    await c.until('all of it', () => c.ended, 10_000)
    expect(c.received.equals(big)).toBe(true)
    c.sock.destroy()
  })
})
