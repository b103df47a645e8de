import type * as k8s from '@kubernetes/client-node'
import {Errors} from '@oclif/core'
import {loadKubeConfig} from '../emulator/kube/client.js'
import {statusCode} from '../emulator/kube/errors.js'
import {parseDuration} from './duration.js'
import {formatElapsed} from '../kubectl/duration.js'
import type {KubeFlagValues} from './flags.js'

/** What a command needs to talk to the API server as kubectl would. */
export interface KubeSession {
  lib: typeof k8s
  kc: k8s.KubeConfig
  core: k8s.CoreV1Api
  /** The configuration core is built on (with --request-timeout): `new session.lib.XApi(session.config)` for other API groups. */
  config: k8s.Configuration
  server: string
  /** --namespace, else the context's namespace, else "default" (kubectl's rule). */
  namespace: string
  requestTimeoutMs: number
}

export async function openSession(flags: KubeFlagValues): Promise<KubeSession> {
  const requestTimeoutMs = parseDuration('--request-timeout', flags['request-timeout'] ?? '0', {bareSeconds: true})
  const lib = await import('@kubernetes/client-node')
  const kc = await loadKubeConfig({kubeconfig: flags.kubeconfig, context: flags.context})
  const server = kc.getCurrentCluster()!.server
  const contextNamespace = kc.getContextObject(kc.getCurrentContext())?.namespace
  const config = lib.createConfiguration({
    baseServer: new lib.ServerConfiguration(server, {}),
    authMethods: {default: kc},
    promiseMiddleware: [
      {
        // --request-timeout bounds each request, as kubectl's client timeout does.
        pre: async (ctx) => {
          if (requestTimeoutMs > 0) ctx.setSignal(AbortSignal.timeout(requestTimeoutMs))
          return ctx
        },
        post: async (res) => res,
      },
    ],
  })
  return {
    lib,
    kc,
    core: new lib.CoreV1Api(config),
    config,
    server,
    namespace: flags.namespace || contextNamespace || 'default',
    requestTimeoutMs,
  }
}

interface StatusBody {
  kind?: string
  reason?: string
  message?: string
}

function statusBody(error: unknown): StatusBody | undefined {
  let body = (error as {body?: unknown})?.body
  if (typeof body === 'string') {
    const text: string = body
    try {
      body = JSON.parse(text)
    } catch {
      return text ? {message: text} : undefined
    }
  }
  return body && typeof body === 'object' ? (body as StatusBody) : undefined
}

/** The host:port kubectl names when the server cannot be reached. */
function hostOf(server: string): string {
  try {
    return new URL(server).host
  } catch {
    return server
  }
}

/**
 * An error as kubectl prints it: `Error from server (NotFound): pods "x" not found`
 * for API statuses, `The connection to the server h:p was refused - ...` when nothing
 * listens, `Unable to connect to the server: ...` for other transport failures.
 */
export function kubectlErrorText(error: unknown, session: Pick<KubeSession, 'server' | 'requestTimeoutMs'>): string {
  const e = error as {name?: string; code?: unknown; errno?: unknown; message?: string; type?: string; cause?: {code?: string}}
  const code = statusCode(error)
  if (code !== undefined) {
    const status = statusBody(error)
    const message = status?.message || e?.message || `HTTP ${code}`
    return status?.reason ? `Error from server (${status.reason}): ${message}` : `Error from server: ${message}`
  }
  const errno = typeof e?.code === 'string' ? e.code : (e?.cause?.code ?? (typeof e?.errno === 'string' ? e.errno : undefined))
  if (errno === 'ECONNREFUSED') return `The connection to the server ${hostOf(session.server)} was refused - did you specify the right host or port?`
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError' || e?.type === 'aborted') {
    return `Unable to connect to the server ${hostOf(session.server)}: no answer within ${formatElapsed(session.requestTimeoutMs)} (--request-timeout)`
  }
  if (errno === 'ENOTFOUND' || errno === 'EHOSTUNREACH' || errno === 'ETIMEDOUT' || errno === 'ECONNRESET' || e?.name === 'FetchError') {
    return `Unable to connect to the server ${hostOf(session.server)}: ${e?.message ?? errno}`
  }
  return `error: ${e?.message ?? String(error)}`
}

/** Is this an API or transport error (printed kubectl's way) rather than a bug or a user error? */
export function isKubeError(error: unknown): boolean {
  const e = error as {name?: string; code?: unknown; type?: string}
  return statusCode(error) !== undefined || typeof e?.code === 'string' || e?.name === 'FetchError' || e?.name === 'AbortError' || e?.name === 'TimeoutError' || e?.type === 'aborted'
}

/** Prints an API error kubectl's way on stderr and exits 1 (main prints nothing more for an ExitError). */
export function failWithKubeError(error: unknown, session: Pick<KubeSession, 'server' | 'requestTimeoutMs'>): never {
  if (!isKubeError(error)) throw error
  process.stderr.write(`${kubectlErrorText(error, session)}\n`)
  throw new Errors.ExitError(1)
}
