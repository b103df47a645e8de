/**
 * The /containerLogs query, decoded as the kubelet decodes v1.PodLogOptions
 * (the API server forwards its own, already validated, options this way).
 */

import type {LogOptions, LogStreamSelection} from '../provider/logs.js'

export type {LogOptions} from '../provider/logs.js'

export class LogOptionsError extends Error {}

/** The API machinery's query bool: absent or 0/f/false/n/no (any case) is false, any other value true. */
function queryBool(v: string | null): boolean {
  if (v === null) return false
  return !['0', 'f', 'false', 'n', 'no'].includes(v.toLowerCase())
}

function queryInt(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name)
  if (v === null) return undefined
  if (!/^[+-]?\d{1,18}$/.test(v)) throw new LogOptionsError(`invalid query: "${name}" must be an integer, got ${JSON.stringify(v)}`)
  return Number(v)
}

const Rfc3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

export function parseLogOptions(query: URLSearchParams, now = Date.now()): LogOptions {
  const q = new URLSearchParams(query)
  // The legacy "tail" parameter is tailLines; tail=all means no tail.
  const tail = q.get('tail')
  if (tail !== null && tail !== '') {
    if (tail === 'all') q.delete('tailLines')
    else q.set('tailLines', tail)
  }
  const tailLines = queryInt(q, 'tailLines')
  const limitBytes = queryInt(q, 'limitBytes')
  const sinceSeconds = queryInt(q, 'sinceSeconds')
  const sinceTimeRaw = q.get('sinceTime')
  let sinceTime: number | undefined
  if (sinceTimeRaw !== null && sinceTimeRaw !== '') {
    sinceTime = Rfc3339.test(sinceTimeRaw) ? Date.parse(sinceTimeRaw) : Number.NaN
    if (Number.isNaN(sinceTime)) throw new LogOptionsError(`invalid query: "sinceTime" must be an RFC 3339 time, got ${JSON.stringify(sinceTimeRaw)}`)
  }
  const stream = (q.get('stream') ?? 'All') as LogStreamSelection
  if (!['All', 'Stdout', 'Stderr'].includes(stream)) throw new LogOptionsError(`invalid query: "stream" must be All, Stdout or Stderr, got ${JSON.stringify(stream)}`)
  if (tailLines !== undefined && tailLines < 0) throw new LogOptionsError(`invalid query: "tailLines" must be greater than or equal to 0, got ${tailLines}`)
  if (limitBytes !== undefined && limitBytes < 1) throw new LogOptionsError(`invalid query: "limitBytes" must be greater than 0, got ${limitBytes}`)
  if (sinceSeconds !== undefined && sinceSeconds < 1) throw new LogOptionsError(`invalid query: "sinceSeconds" must be greater than 0, got ${sinceSeconds}`)
  if (sinceSeconds !== undefined && sinceTime !== undefined) throw new LogOptionsError('invalid query: at most one of "sinceTime" or "sinceSeconds" may be specified')
  if (stream !== 'All' && tailLines !== undefined) throw new LogOptionsError('invalid query: "tailLines" cannot be combined with a "stream" other than All')
  return {
    follow: queryBool(q.get('follow')),
    previous: queryBool(q.get('previous')),
    timestamps: queryBool(q.get('timestamps')),
    sinceMs: sinceSeconds !== undefined ? now - sinceSeconds * 1000 : sinceTime,
    tailLines,
    limitBytes,
    stream,
  }
}
