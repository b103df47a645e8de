import {allContainers} from '../common/pods.js'
import type {V1Pod} from '@kubernetes/client-node'
import * as http from 'node:http'
import * as https from 'node:https'
import {UserError} from '../errors.js'
import type {KubeSession} from './session.js'

export interface LogOptions {
  namespace: string
  pod: string
  /** undefined: every container of the pod, each line prefixed with its name. */
  container?: string
  follow?: boolean
  previous?: boolean
  tailLines?: number
  sinceSeconds?: number
  timestamps?: boolean
  signal?: AbortSignal
}

/** An error status from the log endpoint, shaped like client-node's ApiException so it prints the same way. */
export class LogApiError extends Error {
  constructor(
    readonly code: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${code}`)
  }
}

/** Which containers to read: -c must name one of them (kubectl's message otherwise). */
export function chooseContainers(pod: V1Pod, container?: string): string[] {
  if (container) {
    const all = allContainers(pod).map((c) => c.name)
    if (!all.includes(container)) throw new UserError(`container ${container} is not valid for pod ${pod.metadata?.name}: choose one of [${all.join(' ')}]`)
    return [container]
  }
  return (pod.spec?.containers ?? []).map((c) => c.name)
}

/**
 * Streams one container's log through the API server's pods/log endpoint
 * (the API server proxies it to the node's kubelet API, as for kubectl logs).
 * Plain https with the kubeconfig's credentials: the error body (a Status)
 * is kept so the user sees why, e.g. that the node's kubelet API did not answer.
 */
export async function streamContainerLog(session: KubeSession, opts: LogOptions & {container: string}, onLine: (line: string) => void): Promise<void> {
  const cluster = session.kc.getCurrentCluster()!
  const url = new URL(`${cluster.server.replace(/\/$/, '')}/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods/${encodeURIComponent(opts.pod)}/log`)
  url.searchParams.set('container', opts.container)
  if (opts.follow) url.searchParams.set('follow', 'true')
  if (opts.previous) url.searchParams.set('previous', 'true')
  if (opts.timestamps) url.searchParams.set('timestamps', 'true')
  if (opts.tailLines !== undefined && opts.tailLines >= 0) url.searchParams.set('tailLines', String(opts.tailLines))
  if (opts.sinceSeconds !== undefined) url.searchParams.set('sinceSeconds', String(Math.max(1, Math.ceil(opts.sinceSeconds))))
  const reqOpts: https.RequestOptions = {method: 'GET', headers: {Accept: '*/*'}}
  await session.kc.applyToHTTPSOptions(reqOpts)
  const lib = url.protocol === 'https:' ? https : http
  await new Promise<void>((resolve, reject) => {
    const req = lib.request(url, {...reqOpts, signal: opts.signal}, (res) => {
      if (res.statusCode !== 200) {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (text += d))
        res.on('end', () => reject(new LogApiError(res.statusCode ?? 500, text)))
        res.on('error', reject)
        return
      }
      let buf = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => {
        buf += d
        let i
        while ((i = buf.indexOf('\n')) >= 0) {
          onLine(buf.slice(0, i))
          buf = buf.slice(i + 1)
        }
      })
      res.on('end', () => {
        if (buf) onLine(buf)
        resolve()
      })
      res.on('error', reject)
    })
    req.on('error', (e: Error & {code?: string}) => {
      if (e.name === 'AbortError' || e.code === 'ABORT_ERR') resolve()
      else reject(e)
    })
    if (session.requestTimeoutMs > 0 && !opts.follow) req.setTimeout(session.requestTimeoutMs, () => req.destroy(Object.assign(new Error('timeout'), {name: 'TimeoutError'})))
    req.end()
  })
}

export function readPod(session: KubeSession, namespace: string, name: string): Promise<V1Pod> {
  return session.core.readNamespacedPod({name, namespace})
}

/** Streams the chosen containers of a pod side by side. */
export async function streamPodLogs(session: KubeSession, pod: V1Pod, opts: LogOptions, onLine: (container: string, line: string, multi: boolean) => void): Promise<void> {
  const containers = chooseContainers(pod, opts.container)
  const multi = containers.length > 1
  // One failing container ends the others too: nothing keeps streaming after the command reported an error.
  const all = new AbortController()
  const onAbort = () => all.abort()
  opts.signal?.addEventListener('abort', onAbort)
  try {
    await Promise.all(
      containers.map((c) =>
        streamContainerLog(session, {...opts, container: c, signal: all.signal}, (line) => onLine(c, line, multi)).catch((error) => {
          all.abort()
          throw error
        }),
      ),
    )
  } finally {
    opts.signal?.removeEventListener('abort', onAbort)
  }
}
