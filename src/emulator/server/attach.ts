import {internalErrorStatus, parseRemoteCommandOptions, RemoteCommandProtocols, serveRemoteCommand} from './streaming/remotecommand.js'
import {negotiateUpgrade, podFullName, resolveTarget, type StreamingConnection, type StreamingDeps} from './streaming/request.js'

/**
 * GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1
 * (the kubelet's getAttach and ServeAttach): the client joins the running
 * container's stdio. Whether a terminal is used is the container's own
 * `tty`, not the request's, as the kubelet decides.
 */
export async function serveAttach(conn: StreamingConnection, deps: StreamingDeps): Promise<void> {
  const opts = parseRemoteCommandOptions(conn.url.searchParams)
  if (typeof opts === 'string') return conn.respond(400, opts)
  const resolved = resolveTarget(conn, deps, '/attach/', 1)
  if (!resolved) return
  const {target, tail} = resolved
  const container = tail[0]
  const runtime = deps.streaming()
  if (!runtime) return conn.respond(501, '501 not implemented')
  const ref = {namespace: target.namespace, pod: target.name, container}
  const notFound = `container ${container} not found in pod ${podFullName(target.pod)}`
  const spec = [...(target.pod.spec?.containers ?? []), ...(target.pod.spec?.initContainers ?? [])].find((c) => c.name === container)
  if (!spec || (target.uid !== undefined && target.uid !== target.pod.metadata?.uid) || !runtime.isContainerRunning(ref)) return conn.respond(500, notFound)
  const upgrade = negotiateUpgrade(conn, deps, RemoteCommandProtocols)
  if (!upgrade) return
  await serveRemoteCommand(
    upgrade,
    {opts, creationTimeoutMs: deps.creationTimeoutMs, idleTimeoutMs: deps.idleTimeoutMs},
    (session) =>
      runtime.attachToContainer(ref, {stdin: session.stdin, stdout: session.stdout, stderr: session.stderr, tty: spec.tty === true, resize: session.resize, signal: session.signal}),
    (error) => internalErrorStatus(`error attaching to container: ${(error as Error).message}`),
  )
}
