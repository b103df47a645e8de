import {connect} from 'node:net'
import {sleep} from '../kube/backoff.js'
import type {ForwardStream, PortForwardConnection} from './portforward-client.js'

/**
 * vnode's side of the relay: idle tunnels kept open to the relay pod's
 * tunnel port through pods/portforward. The relay sends PING (0x00) on an
 * idle tunnel, and GO (0x01) when it pairs it with a connection from the
 * cluster; the bytes after GO are that connection's, joined here to vnode's
 * own kubelet server, where TLS ends. A paired tunnel is replaced at once.
 */

export const Ping = 0x00
export const Go = 0x01

export interface TunnelPoolOptions {
  /** A new port-forward connection to the relay pod (called again after each loss). */
  connect: () => Promise<PortForwardConnection>
  /** The relay's tunnel port, on the pod's loopback. */
  tunnelPort: number
  /** vnode's kubelet server. */
  local: {host: string; port: number}
  /** Idle tunnels kept open (each can pair one connection). */
  idle?: number
  /** An idle tunnel that has said nothing for this long is dropped (the relay pings every 15 s). */
  silenceMs?: number
  /** Failed tunnel opens in a row before the port-forward connection is opened again. */
  maxFailures?: number
  backoff?: {initialMs: number; maxMs: number}
  /** The pool went up (the first tunnel reached the relay) or down (with why). */
  onState?: (up: boolean, detail: string) => void
}

export const DefaultIdleTunnels = 4

export class TunnelPool {
  /** Tunnels that reached the relay and wait for a connection. */
  idle = 0
  /** Connections being carried now. */
  active = 0
  /** Connections carried since the start. */
  paired = 0
  up = false
  /** Why the last tunnel or connection failed. */
  lastError: string | undefined
  private readonly o: Required<Omit<TunnelPoolOptions, 'onState'>> & Pick<TunnelPoolOptions, 'onState'>

  constructor(opts: TunnelPoolOptions) {
    const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) as TunnelPoolOptions
    this.o = {idle: DefaultIdleTunnels, silenceMs: 45_000, maxFailures: 3, backoff: {initialMs: 500, maxMs: 5_000}, ...given}
  }

  /** Keeps the pool open until signal aborts, reconnecting with a backoff after each loss. */
  async run(signal: AbortSignal): Promise<void> {
    let delay = this.o.backoff.initialMs
    while (!signal.aborted) {
      let conn: PortForwardConnection | undefined
      try {
        conn = await this.o.connect()
      } catch (error) {
        this.setState(false, (error as Error).message)
      }
      if (conn) {
        const reached = await this.serve(conn, signal)
        if (reached) delay = this.o.backoff.initialMs
        if (!signal.aborted) this.setState(false, 'the port-forward connection to the relay closed')
      }
      await sleep(delay, signal)
      delay = Math.min(delay * 2, this.o.backoff.maxMs)
    }
  }

  private setState(up: boolean, detail: string): void {
    if (!up) this.lastError = detail
    if (up === this.up) return
    this.up = up
    this.o.onState?.(up, detail)
  }

  /** The slots of one port-forward connection; resolves when it is gone (true when a tunnel reached the relay). */
  private async serve(conn: PortForwardConnection, signal: AbortSignal): Promise<boolean> {
    let reached = false
    let failures = 0
    const done = new AbortController()
    const end = () => done.abort()
    signal.addEventListener('abort', end, {once: true})
    conn.once('close', end)
    const slot = async () => {
      let delay = this.o.backoff.initialMs
      while (!done.signal.aborted) {
        const outcome = await this.tunnel(conn, done.signal)
        if (outcome === 'paired' || outcome === 'dropped') {
          reached = true
          failures = 0
          delay = this.o.backoff.initialMs
          continue
        }
        this.lastError = outcome.failed
        if (++failures >= this.o.maxFailures) {
          this.setState(false, outcome.failed)
          break
        }
        await sleep(delay, done.signal)
        delay = Math.min(delay * 2, this.o.backoff.maxMs)
      }
      done.abort()
    }
    await Promise.all(Array.from({length: this.o.idle}, slot))
    signal.removeEventListener('abort', end)
    conn.off('close', end)
    conn.destroy()
    return reached
  }

  /** One tunnel: open, idle until GO (then carried on its own) or until it is lost. */
  private async tunnel(conn: PortForwardConnection, stop: AbortSignal): Promise<'paired' | 'dropped' | {failed: string}> {
    let stream: ForwardStream
    try {
      stream = await conn.forward(this.o.tunnelPort)
    } catch (error) {
      return {failed: `cannot open a tunnel to the relay: ${(error as Error).message}`}
    }
    return new Promise((resolve) => {
      let heard = false
      let last = Date.now()
      const watchdog = setInterval(
        () => {
          if (Date.now() - last > this.o.silenceMs) stream.destroy()
        },
        Math.min(this.o.silenceMs / 3, 5_000),
      )
      const onStop = () => stream.destroy()
      stop.addEventListener('abort', onStop, {once: true})
      const settle = () => {
        clearInterval(watchdog)
        stop.removeEventListener('abort', onStop)
        stream.off('data', onData)
        stream.off('end', onEnd)
        stream.off('close', onClose)
        if (heard) this.idle--
      }
      const onClose = () => {
        settle()
        resolve(heard ? 'dropped' : {failed: 'the relay closed a tunnel before answering (is it running?)'})
      }
      const onData = (chunk: Buffer) => {
        last = Date.now()
        for (let i = 0; i < chunk.length; i++) {
          if (chunk[i] === Ping) {
            if (!heard) {
              heard = true
              this.idle++
              this.setState(true, 'a tunnel reached the relay')
            }
            continue
          }
          settle()
          if (chunk[i] !== Go) {
            stream.destroy()
            return resolve({failed: `the relay sent an unexpected byte 0x${chunk[i].toString(16)}`})
          }
          stream.pause()
          this.carry(stream, chunk.subarray(i + 1))
          return resolve('paired')
        }
      }
      // The relay (or the forward to it) ended the idle tunnel: it is gone.
      const onEnd = () => stream.destroy()
      stream.on('data', onData)
      stream.once('end', onEnd)
      stream.once('close', onClose)
    })
  }

  /** A paired tunnel joined to a new connection to vnode's kubelet server; each side's end crosses over. */
  private carry(stream: ForwardStream, first: Buffer): void {
    this.paired++
    this.active++
    const local = connect({...this.o.local, allowHalfOpen: true})
    local.setNoDelay(true)
    local.on('error', () => undefined)
    if (first.length > 0) local.write(first)
    stream.pipe(local)
    local.pipe(stream)
    let open = true
    const finish = () => {
      if (!open) return
      open = false
      this.active--
      local.destroy()
      stream.destroy()
    }
    local.once('close', finish)
    stream.once('close', finish)
    stream.resume()
  }
}
