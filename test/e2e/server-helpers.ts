import {request} from 'node:https'
import type {PeerCertificate, TLSSocket} from 'node:tls'

export interface DirectResult {
  status: number
  body: string
  peer: PeerCertificate
}

/** A request straight to a node's kubelet port, bypassing the API server. */
export function direct(port: number, path: string, opts: {cert?: Buffer | string; key?: Buffer | string; token?: string; ca?: Buffer | Buffer[]} = {}): Promise<DirectResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'GET',
        cert: opts.cert,
        key: opts.key,
        ca: opts.ca,
        servername: undefined,
        rejectUnauthorized: opts.ca !== undefined,
        checkServerIdentity: () => undefined,
        headers: opts.token ? {authorization: `Bearer ${opts.token}`} : {},
        timeout: 10_000,
        agent: false,
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate()
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body, peer}))
      },
    )
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end()
  })
}

/** Prometheus text samples: `name{labels}` -> value. */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const m = /^(\w+)(\{[^}]*\})? (\S+)(?: \d+)?$/.exec(line)
    if (!m) throw new Error(`not a Prometheus sample: ${line}`)
    out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]))
  }
  return out
}
