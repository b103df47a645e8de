import {RemoteCommandProtocols, serveRemoteCommand, type RemoteCommandOptions, type RemoteCommandSession, type Status} from './remotecommand.js'
import {negotiateUpgrade, type StreamingConnection, type StreamingDeps} from './request.js'

/**
 * Exec's and attach's course once their target is checked: negotiate the
 * upgrade (or answer why not), then serve one remote-command session with
 * the server's stream timeouts.
 */
export async function serveSessionRequest(
  conn: StreamingConnection,
  deps: StreamingDeps,
  opts: RemoteCommandOptions,
  run: (session: RemoteCommandSession) => Promise<void>,
  describe: (error: unknown) => Status,
): Promise<void> {
  const upgrade = negotiateUpgrade(conn, deps, RemoteCommandProtocols)
  if (!upgrade) return
  await serveRemoteCommand(upgrade, {opts, creationTimeoutMs: deps.creationTimeoutMs, idleTimeoutMs: deps.idleTimeoutMs}, run, describe)
}
