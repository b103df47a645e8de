import {allContainersWithEphemeral} from '../../../common/pods.js'
import {internalErrorStatus, parseRemoteCommandOptions} from '../streaming/remotecommand.js'
import {podFullName, resolveContainer, type StreamingConnection, type StreamingDeps} from '../streaming/request.js'
import {serveSessionRequest} from '../streaming/session-request.js'
import {StreamingMethods, type StreamingRoute} from './route.js'

/**
 * GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1
 * (the kubelet's getAttach and ServeAttach): the client joins the running
 * container's stdio. Whether a terminal is used is the container's own
 * `tty`, not the request's, as the kubelet decides.
 */
export async function serveAttach(conn: StreamingConnection, deps: StreamingDeps): Promise<void> {
  const opts = parseRemoteCommandOptions(conn.url.searchParams)
  if (typeof opts === 'string') return conn.respond(400, opts)
  const resolved = resolveContainer(conn, deps, '/attach/')
  if (!resolved) return
  const {target, container, runtime, ref, uidMatches} = resolved
  const notFound = `container ${container} not found in pod ${podFullName(target.pod)}`
  const spec = allContainersWithEphemeral(target.pod).find((c) => c.name === container)
  if (!spec || !uidMatches || !runtime.isContainerRunning(ref)) return conn.respond(500, notFound)
  await serveSessionRequest(
    conn,
    deps,
    opts,
    (session) => runtime.attachToContainer(ref, {stdin: session.stdin, stdout: session.stdout, stderr: session.stderr, tty: spec.tty === true, resize: session.resize, signal: session.signal}),
    (error) => internalErrorStatus(`error attaching to container: ${(error as Error).message}`),
  )
}

export const AttachRoute: StreamingRoute = {kind: 'streaming', prefix: '/attach/', methods: StreamingMethods, serve: serveAttach}
