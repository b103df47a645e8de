import type {V1ContainerPort, V1HTTPGetAction, V1LifecycleHandler, V1Probe, V1TCPSocketAction} from '@kubernetes/client-node'
import {execa} from 'execa'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import {TargetKubernetesVersion} from '../../version.js'
import {expand, mappingFor} from '../env/expansion.js'
import {grpcHealthCheck} from './grpc.js'
import {signalGroup} from '../process/proc.js'

/** What the kubelet caps: probe response bodies and the output kept from exec. */
export const MaxProbeBodyBytes = 10 * 1024
export const MaxProbeRedirects = 10

/** Where a container's handlers run: exec in its env and cwd; network probes to its host. */
export interface HandlerContext {
  env: Record<string, string>
  cwd: string
  /** The argv prefix that runs a command in the container's namespaces (a sandboxed container); cwd is then in its view. */
  enter?: string[]
  /** Host for httpGet/tcpSocket without a host: the pod's own IP on the pod network, else loopback (a pod on the host's network). */
  host: string
  ports: V1ContainerPort[]
}

/**
 * output: what the handler said (an exec's stdout then stderr, as written: the
 * kubelet's exec-probe message); error: for a failed exec, the runtime's error
 * (a lifecycle hook's message names both).
 */
export type HandlerOutcome = {result: 'success' | 'failure' | 'warning'; output: string; error?: string}

export function probeUserAgent(): string {
  const [major, minor] = TargetKubernetesVersion.replace(/^v/, '').split('.')
  return `kube-probe/${major}.${minor}`
}

/** Runs a probe's action with its timeout. */
export function runProbeAction(probe: V1Probe, ctx: HandlerContext): Promise<HandlerOutcome> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000
  if (probe.exec) return runExec(probe.exec.command ?? [], ctx, timeoutMs)
  if (probe.httpGet) return runHttpGet(probe.httpGet, ctx, timeoutMs)
  if (probe.tcpSocket) return runTcp(probe.tcpSocket, ctx, timeoutMs)
  if (probe.grpc) return grpcHealthCheck(ctx.host, Number(probe.grpc.port), probe.grpc.service ?? '', timeoutMs)
  return Promise.resolve({result: 'failure', output: 'missing probe handler'})
}

/** Runs a lifecycle hook (postStart / preStop); timeoutMs bounds it (the grace for preStop). */
export async function runHook(handler: V1LifecycleHandler, ctx: HandlerContext, timeoutMs: number, signal?: AbortSignal): Promise<HandlerOutcome> {
  if (handler.exec) return runExec(handler.exec.command ?? [], ctx, timeoutMs, signal)
  if (handler.httpGet) return runHttpGet(handler.httpGet, ctx, timeoutMs)
  if (handler.sleep) {
    const ms = Math.min(timeoutMs, Number(handler.sleep.seconds ?? 0) * 1000)
    await new Promise<void>((r) => {
      const t = setTimeout(r, ms)
      signal?.addEventListener('abort', () => (clearTimeout(t), r()), {once: true})
    })
    return {result: 'success', output: ''}
  }
  if (handler.tcpSocket) return {result: 'failure', output: 'tcpSocket lifecycle handlers are not supported'}
  return {result: 'failure', output: 'missing lifecycle handler'}
}

async function runExec(command: string[], ctx: HandlerContext, timeoutMs: number, signal?: AbortSignal): Promise<HandlerOutcome> {
  const argv = command.map((a) => expand(a, mappingFor(ctx.env)))
  if (argv.length === 0) return {result: 'failure', output: 'exec: no command'}
  const spawned = ctx.enter && ctx.enter.length > 0 ? [...ctx.enter, ...argv] : argv
  const child = execa(spawned[0], spawned.slice(1), {
    env: ctx.env,
    extendEnv: false,
    cwd: ctx.enter && ctx.enter.length > 0 ? '/' : ctx.cwd,
    detached: true,
    cleanup: false,
    stdin: 'ignore',
    reject: false,
    forceKillAfterDelay: false,
    maxBuffer: MaxProbeBodyBytes,
    stripFinalNewline: false,
  })
  // The timeout and the abort end the command's whole process group, not only the child: in a sandbox the
  // child is nsenter, and the command it forked would live on holding the output pipes, so the exec never ends.
  let timedOut = false
  const killGroup = () => {
    if (child.pid) signalGroup(child.pid, 'SIGKILL')
    child.kill('SIGKILL')
  }
  const timer = setTimeout(() => {
    timedOut = true
    killGroup()
  }, timeoutMs)
  const onAbort = () => killGroup()
  if (signal?.aborted) onAbort()
  else signal?.addEventListener('abort', onAbort, {once: true})
  const r = await child
  clearTimeout(timer)
  signal?.removeEventListener('abort', onAbort)
  if (child.pid) signalGroup(child.pid, 'SIGKILL')
  // The CRI's ExecSync: stdout, then stderr, untouched.
  const output = `${String(r.stdout ?? '')}${String(r.stderr ?? '')}`
  if (timedOut) return {result: 'failure', output: `command ${JSON.stringify(argv)} timed out`}
  if (r.failed && r.exitCode === undefined)
    return {result: 'failure', output: `exec ${JSON.stringify(argv[0])}: ${r.code === 'ENOENT' ? 'executable file not found in $PATH' : (r.shortMessage ?? 'failed')}`}
  if (r.exitCode === 0) return {result: 'success', output}
  return {result: 'failure', output, error: `command '${argv.join(' ')}' exited with ${r.exitCode}: ${String(r.stderr ?? '')}`}
}

export function resolvePort(port: number | string | undefined, ports: V1ContainerPort[]): number | string {
  if (typeof port === 'number') return port
  if (port === undefined) return 0
  if (/^\d+$/.test(port)) return Number(port)
  const named = ports.find((p) => p.name === port)
  return named ? named.containerPort : `unknown port name "${port}"`
}

function runHttpGet(action: V1HTTPGetAction, ctx: HandlerContext, timeoutMs: number): Promise<HandlerOutcome> {
  const port = resolvePort(action.port as number | string, ctx.ports)
  if (typeof port === 'string') return Promise.resolve({result: 'failure', output: port})
  const scheme = (action.scheme ?? 'HTTP').toLowerCase()
  const host = action.host || ctx.host
  const path = action.path ? (action.path.startsWith('/') ? action.path : `/${action.path}`) : '/'
  const url = new URL(`${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}${path}`)
  const headers: Record<string, string> = {'User-Agent': probeUserAgent(), Accept: '*/*'}
  for (const h of action.httpHeaders ?? []) headers[h.name] = h.value
  const deadline = Date.now() + timeoutMs
  return httpGet(url, headers, deadline, 0)
}

function httpGet(url: URL, headers: Record<string, string>, deadline: number, redirects: number): Promise<HandlerOutcome> {
  return new Promise((resolve) => {
    const lib = url.protocol === 'https:' ? https : http
    const remaining = Math.max(1, deadline - Date.now())
    const req = lib.get(url, {headers, timeout: remaining, rejectUnauthorized: false}, (res) => {
      let got = 0
      let body = ''
      res.on('data', (d: Buffer) => {
        if (got < MaxProbeBodyBytes) body += d.subarray(0, MaxProbeBodyBytes - got).toString()
        got += d.length
        if (got >= MaxProbeBodyBytes) res.destroy()
      })
      let settled = false
      const done = () => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        const code = res.statusCode ?? 0
        if (code >= 300 && code < 400 && res.headers.location) {
          const next = new URL(res.headers.location, url)
          if (next.hostname !== url.hostname) return resolve({result: 'warning', output: `Probe terminated redirects, Response body: ${body}`})
          if (redirects >= MaxProbeRedirects) return resolve({result: 'failure', output: 'stopped after 10 redirects'})
          return void httpGet(next, headers, deadline, redirects + 1).then(resolve)
        }
        if (code >= 200 && code < 400) return resolve({result: 'success', output: body})
        resolve({result: 'failure', output: `HTTP probe failed with statuscode: ${code}`})
      }
      res.once('end', done)
      res.once('close', done)
    })
    const timer = setTimeout(() => {
      req.destroy()
      resolve({result: 'failure', output: `Get "${url.href}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`})
    }, remaining)
    req.once('timeout', () => req.destroy(new Error('timeout')))
    req.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      resolve({result: 'failure', output: `Get "${url.href}": ${dialError(url.hostname, url.port, e)}`})
    })
  })
}

function dialError(host: string, port: string | number, e: NodeJS.ErrnoException): string {
  const addr = `${host}:${port}`
  if (e.code === 'ECONNREFUSED') return `dial tcp ${addr}: connect: connection refused`
  if (e.message === 'timeout') return `dial tcp ${addr}: i/o timeout`
  return `dial tcp ${addr}: ${e.message}`
}

function runTcp(action: V1TCPSocketAction, ctx: HandlerContext, timeoutMs: number): Promise<HandlerOutcome> {
  const port = resolvePort(action.port as number | string, ctx.ports)
  if (typeof port === 'string') return Promise.resolve({result: 'failure', output: port})
  const host = action.host || ctx.host
  return new Promise((resolve) => {
    const sock = net.connect({host, port})
    const finish = (o: HandlerOutcome) => {
      clearTimeout(timer)
      sock.destroy()
      resolve(o)
    }
    const timer = setTimeout(() => finish({result: 'failure', output: `dial tcp ${host}:${port}: i/o timeout`}), timeoutMs)
    sock.once('connect', () => finish({result: 'success', output: ''}))
    sock.once('error', (e: NodeJS.ErrnoException) => finish({result: 'failure', output: dialError(host, port, e)}))
  })
}
