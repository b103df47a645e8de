import type {Socket} from 'node:net'
import {finished} from 'node:stream/promises'
import {TerminalSizes} from '../../provider/streaming.js'
import {SpdySession, type SpdyStream} from '../spdy/session.js'
import {acceptSpdy} from '../spdy/upgrade.js'

/**
 * The kubelet's remote command protocol over SPDY (cri/streaming/remotecommand:
 * httpstream.go, exec.go): the client opens one stream per channel (error,
 * stdin, stdout, stderr, resize), each marked by its `streamType` header; the
 * result is a metav1.Status on the error stream (JSON from v4 on).
 */

export const StreamProtocolV4 = 'v4.channel.k8s.io'
export const StreamProtocolV3 = 'v3.channel.k8s.io'
export const StreamProtocolV2 = 'v2.channel.k8s.io'
export const StreamProtocolV1 = 'channel.k8s.io'
/** What the kubelet accepts over SPDY, in its order (v5 is only a WebSocket protocol there). */
export const RemoteCommandProtocols = [StreamProtocolV4, StreamProtocolV3, StreamProtocolV2, StreamProtocolV1] as const

/** The kubelet's streamCreationTimeout: how long the client has to open its streams. */
export const DefaultStreamCreationTimeoutMs = 30_000

export interface RemoteCommandOptions {
  stdin: boolean
  stdout: boolean
  stderr: boolean
  tty: boolean
}

/** The query of an exec/attach request (remotecommand.NewOptions): an options object or the 400 message. */
export function parseRemoteCommandOptions(query: URLSearchParams): RemoteCommandOptions | string {
  const tty = query.get('tty') === '1'
  const stdin = query.get('input') === '1'
  const stdout = query.get('output') === '1'
  // A terminal merges stderr into stdout: the kubelet drops stderr when both are asked for.
  const stderr = query.get('error') === '1' && !tty
  if (!stdin && !stdout && !stderr) return 'you must specify at least 1 of stdin, stdout, stderr'
  return {stdin, stdout, stderr, tty}
}

/** A metav1.Status as the kubelet writes it on the error stream. */
export interface Status {
  metadata: Record<string, never>
  status: 'Success' | 'Failure'
  message?: string
  reason?: string
  details?: {causes: {reason?: string; message: string}[]}
  code?: number
}

export function successStatus(): Status {
  return {metadata: {}, status: 'Success'}
}

/** What kubectl turns into `command terminated with exit code N` (reason NonZeroExitCode, cause ExitCode). */
export function exitCodeStatus(exitCode: number, detail: string): Status {
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: ${detail}`,
    reason: 'NonZeroExitCode',
    details: {causes: [{reason: 'ExitCode', message: String(exitCode)}]},
  }
}

/** apierrors.NewInternalError. */
export function internalErrorStatus(message: string): Status {
  return {metadata: {}, status: 'Failure', message: `Internal error occurred: ${message}`, reason: 'InternalError', details: {causes: [{message}]}, code: 500}
}

/** Reads the resize stream: concatenated JSON objects {"Width":w,"Height":h}. */
export function resizeEvents(stream: SpdyStream): TerminalSizes {
  const events = new TerminalSizes()
  let pending = ''
  stream.setEncoding('utf8')
  stream.on('data', (text: string) => {
    pending += text
    for (;;) {
      const start = pending.indexOf('{')
      const end = pending.indexOf('}', start)
      if (start < 0 || end < 0) break
      const json = pending.slice(start, end + 1)
      pending = pending.slice(end + 1)
      try {
        const v = JSON.parse(json) as {Width?: unknown; Height?: unknown}
        const width = Number(v.Width)
        const height = Number(v.Height)
        if (Number.isInteger(width) && Number.isInteger(height) && width >= 0 && height >= 0 && width <= 0xffff && height <= 0xffff) events.push({width, height})
      } catch {
        /* not a size: ignored, as a failed decode ends the kubelet's loop */
      }
    }
    if (pending.length > 4096) pending = ''
  })
  return events
}

export interface RemoteCommandSession {
  protocol: string
  stdin?: SpdyStream
  stdout?: SpdyStream
  stderr?: SpdyStream
  resize?: TerminalSizes
  /** Aborted when the connection is gone. */
  signal: AbortSignal
  /** Ends the output streams, writes the result, closes the connection. */
  finish(status: Status): Promise<void>
}

export interface RemoteCommandStart {
  socket: Socket
  head: Buffer
  protocol: string
  opts: RemoteCommandOptions
  creationTimeoutMs?: number
  idleTimeoutMs?: number
}

/**
 * Upgrades the connection and waits for the client's streams (the
 * protocol's waitForStreams); rejects when they do not all arrive in time.
 */
export function startRemoteCommand(s: RemoteCommandStart): Promise<RemoteCommandSession> {
  const {opts, protocol} = s
  const resizable = protocol === StreamProtocolV4 || protocol === StreamProtocolV3
  const expected = 1 + Number(opts.stdin) + Number(opts.stdout) + Number(opts.stderr) + Number(opts.tty && resizable)
  const abort = new AbortController()
  const streams: Partial<Record<'error' | 'stdin' | 'stdout' | 'stderr' | 'resize', SpdyStream>> = {}
  let received = 0

  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    const ready = () => {
      clearTimeout(timer)
      const session: RemoteCommandSession = {
        protocol,
        stdin: streams.stdin,
        stdout: streams.stdout,
        stderr: streams.stderr,
        resize: streams.resize ? resizeEvents(streams.resize) : undefined,
        signal: abort.signal,
        finish: (status) => finish(spdy, streams, protocol, status),
      }
      resolve(session)
    }
    acceptSpdy(s.socket, protocol)
    const spdy = new SpdySession(s.socket, s.head, {
      idleTimeoutMs: s.idleTimeoutMs,
      onStream: (stream) => {
        const type = stream.header('streamtype')
        if (type === 'error' || type === 'stdin' || type === 'stdout' || type === 'stderr' || type === 'resize') {
          streams[type] = stream
          // The client never writes on these: read them so they can end.
          if (type === 'error' || type === 'stdout' || type === 'stderr') stream.resume()
        } else {
          stream.resume()
        }
        if (++received === expected) queueMicrotask(ready)
        return true
      },
    })
    spdy.on('close', () => {
      abort.abort()
      if (received < expected) {
        clearTimeout(timer)
        reject(new Error('connection closed before the client created its streams'))
      }
    })
    timer = setTimeout(() => {
      spdy.destroy()
      reject(new Error('timed out waiting for client to create streams'))
    }, s.creationTimeoutMs ?? DefaultStreamCreationTimeoutMs)
  })
}

async function endStream(stream: SpdyStream | undefined): Promise<void> {
  if (!stream || stream.destroyed) return
  stream.end()
  await finished(stream, {readable: false}).catch(() => undefined)
}

async function finish(spdy: SpdySession, streams: Partial<Record<string, SpdyStream>>, protocol: string, status: Status): Promise<void> {
  if (spdy.closed) return
  await Promise.all([endStream(streams.stdout), endStream(streams.stderr)])
  const error = streams.error
  if (error && !error.destroyed && !error.localClosed) {
    if (protocol === StreamProtocolV4) error.write(JSON.stringify(status))
    else if (status.status === 'Failure') error.write(status.message ?? 'unknown error')
  }
  await endStream(error)
  streams.stdin?.destroy()
  streams.resize?.destroy()
  spdy.close()
}

/**
 * The common course of exec and attach once the target is checked: upgrade,
 * wait for the client's streams, run, and end with the Status the client
 * reads its result from (success, or what describe() makes of the error).
 * A connection that never completes its streams ends quietly.
 */
export async function serveRemoteCommand(
  upgrade: {socket: Socket; head: Buffer; protocol: string},
  start: Omit<RemoteCommandStart, 'socket' | 'head' | 'protocol'>,
  run: (session: RemoteCommandSession) => Promise<void>,
  describe: (error: unknown) => Status,
): Promise<void> {
  let session: RemoteCommandSession
  try {
    session = await startRemoteCommand({...upgrade, ...start})
  } catch {
    return
  }
  let status: Status
  try {
    await run(session)
    status = successStatus()
  } catch (error) {
    status = describe(error)
  }
  await session.finish(status)
}
