import type {IncomingMessage, ServerResponse} from 'node:http'
import {isContainerLogRefusal} from '../../provider/logs.js'
import {LogFormatter} from '../log-format.js'
import {LogOptionsError, parseLogOptions} from '../log-options.js'
import {nameProblem, pathSegments} from '../validate.js'
import {send} from './respond.js'
import {type PlainRoute, ReadMethods, type RouteContext} from './route.js'

const Prefix = '/containerLogs/'

/** Writes one chunk, waiting for the socket to drain; an abort (client gone, server stopping) ends the wait. */
function writer(res: ServerResponse, signal: AbortSignal): (chunk: string) => Promise<void> {
  return (chunk) =>
    new Promise<void>((resolve) => {
      if (signal.aborted || res.write(chunk)) return resolve()
      const done = () => {
        res.off('drain', done)
        signal.removeEventListener('abort', done)
        resolve()
      }
      res.on('drain', done)
      signal.addEventListener('abort', done, {once: true})
    })
}

/**
 * GET /containerLogs/{namespace}/{pod}/{container} (the kubelet's
 * getContainerLogs): the container's log, with the kubelet's checks and
 * messages, optionally followed until the client goes.
 */
async function serveContainerLogs(req: IncomingMessage, res: ServerResponse, url: URL, ctx: RouteContext): Promise<void> {
  const segs = pathSegments(url.pathname, Prefix)
  if (!segs) return send(res, 400, 'invalid path: bad percent-encoding')
  if (segs.length !== 3) return send(res, 404, '404 page not found\n')
  const [namespace, pod, container] = segs
  if (!pod) return send(res, 400, '{"message": "Missing podID."}')
  if (!container) return send(res, 400, '{"message": "Missing container name."}')
  if (!namespace) return send(res, 400, '{"message": "Missing podNamespace."}')
  const problem = nameProblem('namespace', namespace) ?? nameProblem('pod', pod) ?? nameProblem('container', container)
  if (problem) return send(res, 400, problem)
  let opts
  try {
    opts = parseLogOptions(url.searchParams)
  } catch (error) {
    if (error instanceof LogOptionsError) return send(res, 400, error.message)
    throw error
  }
  const log = ctx.logs.getContainerLogs({namespace, pod, container}, opts.previous)
  if (isContainerLogRefusal(log)) return send(res, log.status, log.message)
  res.writeHead(200, {'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff'})
  // The kubelet flushes at once, so a following client sees the response start before any line.
  res.flushHeaders()
  if (req.method === 'HEAD') return void res.end()
  const abort = new AbortController()
  ctx.follows.add(abort)
  const onClose = () => abort.abort()
  res.on('close', onClose)
  try {
    const fmt = new LogFormatter(opts, writer(res, abort.signal))
    await log.read(
      async (record) => {
        await fmt.record(record)
        return fmt.done
      },
      {tailLines: opts.tailLines, follow: opts.follow ? {signal: abort.signal} : undefined},
    )
    res.end()
  } finally {
    res.off('close', onClose)
    ctx.follows.delete(abort)
  }
}

export const ContainerLogsRoute: PlainRoute = {kind: 'plain', prefix: Prefix, methods: ReadMethods, serve: serveContainerLogs}
