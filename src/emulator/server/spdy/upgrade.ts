import type {IncomingMessage} from 'node:http'
import {STATUS_CODES} from 'node:http'
import type {Socket} from 'node:net'

/**
 * The HTTP side of a streaming request on a raw socket (the server's
 * 'upgrade' event): protocol negotiation as k8s.io/apimachinery's
 * httpstream.Handshake and the SPDY/3.1 upgrade response.
 */

export const HeaderProtocolVersion = 'X-Stream-Protocol-Version'
export const HeaderAcceptedProtocolVersions = 'X-Accepted-Stream-Protocol-Versions'
export const HeaderSpdy31 = 'SPDY/3.1'

/** Every value of a header, split on commas (Node joins repeated custom headers with ", "). */
export function headerValues(req: IncomingMessage, name: string): string[] {
  const raw = req.headers[name.toLowerCase()]
  const all = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]
  return all
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

export function isSpdyUpgrade(req: IncomingMessage): boolean {
  const connection = String(req.headers.connection ?? '').toLowerCase()
  const upgrade = String(req.headers.upgrade ?? '').toLowerCase()
  return connection.includes('upgrade') && upgrade.includes(HeaderSpdy31.toLowerCase())
}

export type Negotiation = {ok: true; protocol: string} | {ok: false; status: number; message: string; headers?: Record<string, string>}

/** The first protocol the client offers that the server supports (the client's preference wins). */
export function negotiate(req: IncomingMessage, serverProtocols: readonly string[]): Negotiation {
  const client = headerValues(req, HeaderProtocolVersion)
  if (client.length === 0) return {ok: false, status: 400, message: `unable to upgrade: ${HeaderProtocolVersion} is required`}
  const protocol = client.find((p) => serverProtocols.includes(p))
  if (protocol) return {ok: true, protocol}
  return {
    ok: false,
    status: 403,
    message: `unable to upgrade: unable to negotiate protocol: client supports [${client.join(' ')}], server accepts [${serverProtocols.join(' ')}]`,
    headers: {[HeaderAcceptedProtocolVersions]: serverProtocols.join(', ')},
  }
}

/** A complete plain-text HTTP response on a socket that was not upgraded, then the connection ends. */
export function rejectSocket(socket: Socket, status: number, body: string, headers: Record<string, string> = {}): void {
  if (socket.destroyed) return
  const text = body.endsWith('\n') ? body : `${body}\n`
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: text/plain; charset=utf-8',
    'X-Content-Type-Options: nosniff',
    `Content-Length: ${Buffer.byteLength(text)}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ]
  socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`)
  socket.destroySoon()
}

/** 101 Switching Protocols to SPDY/3.1 with the negotiated protocol. */
export function acceptSpdy(socket: Socket, protocol: string): void {
  socket.write(
    ['HTTP/1.1 101 Switching Protocols', 'Connection: Upgrade', `Upgrade: ${HeaderSpdy31}`, `${HeaderProtocolVersion}: ${protocol}`, `Date: ${new Date().toUTCString()}`].join('\r\n') + '\r\n\r\n',
  )
}
