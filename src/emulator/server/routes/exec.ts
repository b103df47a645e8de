import {ExitCodeError} from '../../provider/streaming.js'
import {exitCodeStatus, internalErrorStatus, parseRemoteCommandOptions} from '../streaming/remotecommand.js'
import {resolveContainer, type StreamingConnection, type StreamingDeps} from '../streaming/request.js'
import {serveSessionRequest} from '../streaming/session-request.js'
import {StreamingMethods, type StreamingRoute} from './route.js'

/**
 * GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=...&input=1&output=1&error=1&tty=1
 * (the kubelet's getExec and ServeExec): the command runs as a new process
 * of the runtime; its exit code comes back on the error stream.
 */
export async function serveExec(conn: StreamingConnection, deps: StreamingDeps): Promise<void> {
  const opts = parseRemoteCommandOptions(conn.url.searchParams)
  if (typeof opts === 'string') return conn.respond(400, opts)
  const command = conn.url.searchParams.getAll('command')
  if (command.length === 0) return conn.respond(400, 'you must specify at least one command for the container')
  const resolved = resolveContainer(conn, deps, '/exec/')
  if (!resolved) return
  const {container, runtime, ref, uidMatches} = resolved
  if (!uidMatches || !runtime.isContainerRunning(ref)) return conn.respond(500, `container not found (${JSON.stringify(container)})`)
  await serveSessionRequest(
    conn,
    deps,
    opts,
    (session) => runtime.execInContainer(ref, command, {stdin: session.stdin, stdout: session.stdout, stderr: session.stderr, tty: opts.tty, resize: session.resize, signal: session.signal}),
    (error) => (error instanceof ExitCodeError ? exitCodeStatus(error.exitCode, error.message) : internalErrorStatus(`error executing command in container: ${(error as Error).message}`)),
  )
}

export const ExecRoute: StreamingRoute = {kind: 'streaming', prefix: '/exec/', methods: StreamingMethods, serve: serveExec}
