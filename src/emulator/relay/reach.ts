import type {KubeConfig} from '@kubernetes/client-node'
import {request, type RequestOptions} from 'node:https'

/**
 * Can the API server reach a node's kubelet API? Asked the way `kubectl
 * logs` needs it: `GET /api/v1/nodes/<node>/proxy/healthz`, which the API
 * server serves by dialing the node's address and kubelet port.
 */

export interface Reach {
  reachable: boolean
  /** One line: what answered, or why nothing did. */
  why: string
  /** The API server's own refusal (this user may not use nodes/proxy): nothing was learnt about the node. */
  unknown?: boolean
  /** The HTTP status of the answer, when there was one. */
  status?: number
  /** The API server dialled the kubelet port and refused its serving certificate: a relay, carrying the same TLS, would not help. */
  untrusted?: boolean
}

export const DefaultReachTimeoutMs = 10_000

export async function checkNodeReachable(kc: KubeConfig, node: string, timeoutMs = DefaultReachTimeoutMs): Promise<Reach> {
  const cluster = kc.getCurrentCluster()
  if (!cluster) return {reachable: false, why: 'no current cluster in the kubeconfig', unknown: true}
  const base = new URL(cluster.server)
  const opts: RequestOptions = {
    method: 'GET',
    hostname: base.hostname.replace(/^\[|\]$/g, ''),
    port: base.port || 443,
    path: `${base.pathname.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(node)}/proxy/healthz`,
    timeout: timeoutMs,
    agent: false,
  }
  await kc.applyToHTTPSOptions(opts)
  return new Promise((resolve) => {
    const req = request(opts, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body = (body + d).slice(0, 2000)))
      res.on('end', () => resolve(judge(res.statusCode ?? 0, body)))
      res.on('error', (e) => resolve({reachable: false, why: e.message}))
    })
    req.once('timeout', () => {
      req.destroy()
      resolve({reachable: false, why: `no answer through the API server in ${timeoutMs / 1000}s`})
    })
    req.once('error', (e) => resolve({reachable: false, why: `cannot ask the API server: ${e.message}`, unknown: true}))
    req.end()
  })
}

/**
 * An answer from the kubelet (any status in its plain-text body) means the
 * API server reached it; a Status object is the API server's own: 503/500
 * with the dial error when it could not, 403 when this user may not ask.
 */
export function judge(status: number, body: string): Reach {
  let apiStatus: {kind?: string; message?: string} | undefined
  try {
    const parsed = JSON.parse(body) as {kind?: string; message?: string}
    if (parsed?.kind === 'Status') apiStatus = parsed
  } catch {
    // a kubelet's answer is plain text
  }
  if (!apiStatus) return {reachable: true, status, why: `the kubelet API answered ${status}${status === 200 ? '' : ` (${body.trim().slice(0, 80)})`}`}
  const message = (apiStatus.message ?? '').trim()
  if (status === 403 || status === 401) return {reachable: false, status, why: `the API server refused the check: ${message || status}`, unknown: true}
  if (/x509: |tls: failed to verify certificate/.test(message)) return {reachable: false, status, why: message, untrusted: true}
  return {reachable: false, status, why: message || `the API server answered ${status}`}
}
