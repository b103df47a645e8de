import type {ServerResponse} from 'node:http'
import {metaTime} from '../summary.js'

/** How every route answers: plain text (or the given type), no sniffing, an exact length. */
export function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, {'Content-Type': contentType, 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body)})
  res.end(body)
}

/** Plain text with extra headers, newline-terminated (a streaming request refused before its upgrade). */
export function sendWith(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
  send(res, status, body.endsWith('\n') ? body : `${body}\n`)
}

/** JSON as the API writes it: client-node models carry Dates, which become RFC 3339 seconds. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v: unknown) {
    const original = this[key]
    return original instanceof Date ? metaTime(original) : v
  })
}

export function sendJson(res: ServerResponse, value: unknown): void {
  send(res, 200, toJson(value), 'application/json')
}
