import {connect} from 'node:net'
import type {Duplex} from 'node:stream'
import {type ContainerStreaming, type DialAttempt, DialError} from '../../provider/streaming.js'
import {DefaultStreamCreationTimeoutMs} from '../streaming/remotecommand.js'
import {negotiateUpgrade, podFullName, resolveTarget, type PodTarget, type StreamingConnection, type StreamingDeps} from '../streaming/request.js'
import {SpdySession, type SpdyStream} from '../spdy/session.js'
import {acceptSpdy} from '../spdy/upgrade.js'
import {StreamingMethods, type StreamingRoute} from './route.js'

/**
 * GET|POST /portForward/{namespace}/{pod}[/{uid}] (the kubelet's
 * getPortForward and cri/streaming/portforward/httpstream.go): for each
 * forwarded connection the client opens an error stream and a data stream
 * with the same requestID and port; the data stream is joined to a TCP
 * connection to localhost:port in the pod's network: inside its network
 * namespace when it has one of its own (the pod network; the runtime enters
 * it), else on this host's loopback (a pod on the host's network).
 */

export const PortForwardProtocol = 'portforward.k8s.io'

/** How long one dial may take before the forward reports an error. */
export const DefaultDialTimeoutMs = 10_000

interface Pair {
  requestId: string
  error?: SpdyStream
  data?: SpdyStream
  timer: NodeJS.Timeout
}

/** Why a stream's headers are unacceptable (httpStreamReceived), or undefined. */
export function portForwardStreamProblem(port: string | undefined, type: string | undefined): string | undefined {
  if (!port) return '"port" header is required'
  if (!/^\d+$/.test(port) || Number(port) > 65535) return `unable to parse ${JSON.stringify(port)} as a port`
  if (Number(port) < 1) return `port ${JSON.stringify(port)} must be > 0`
  if (!type) return '"streamType" header is required'
  if (type !== 'error' && type !== 'data') return `invalid stream type ${JSON.stringify(type)}`
  return undefined
}

export async function servePortForward(conn: StreamingConnection, deps: StreamingDeps): Promise<void> {
  const resolved = resolveTarget(conn, deps, '/portForward/', 0)
  if (!resolved) return
  const {target} = resolved
  if ((target.uid !== undefined && target.uid !== target.pod.metadata?.uid) || !deps.isRunning(target.pod)) {
    return conn.respond(500, `pod not found (${JSON.stringify(podFullName(target.pod))})`)
  }
  const upgrade = negotiateUpgrade(conn, deps, [PortForwardProtocol])
  if (!upgrade) return
  acceptSpdy(upgrade.socket, upgrade.protocol)
  const pairs = new Map<string, Pair>()
  const forwards = new Set<Duplex>()
  const creationMs = deps.creationTimeoutMs ?? DefaultStreamCreationTimeoutMs

  const session = new SpdySession(upgrade.socket, upgrade.head, {
    idleTimeoutMs: deps.idleTimeoutMs,
    onStream: (stream) => {
      const type = stream.header('streamtype')
      if (portForwardStreamProblem(stream.header('port'), type)) return false
      // Without a requestID, the pair is found from stream ids as the kubelet does (error n, data n+2).
      const requestId = stream.header('requestid') ?? String(type === 'error' ? stream.id : stream.id - 2)
      let pair = pairs.get(requestId)
      if (!pair) {
        const p: Pair = {
          requestId,
          timer: setTimeout(() => {
            pairs.delete(requestId)
            fail(p, `(conn=${upgrade.socket.remotePort}, request=${requestId}) timed out waiting for streams`)
          }, creationMs),
        }
        pairs.set(requestId, (pair = p))
      }
      const slot = type === 'error' ? 'error' : 'data'
      if (pair[slot]) {
        const p = pair
        queueMicrotask(() => writeError(p.error, `error processing stream for request ${requestId}: ${slot} stream already assigned`))
        stream.resume()
        return true
      }
      pair[slot] = stream
      // The client only half-closes the error stream; read it so both sides can end.
      if (slot === 'error') stream.resume()
      if (pair.error && pair.data) {
        clearTimeout(pair.timer)
        pairs.delete(requestId)
        const complete = pair as Required<Pair>
        queueMicrotask(() => forward(target, complete, forwards, deps.streaming()))
      }
      return true
    },
  })

  await new Promise<void>((resolve) => session.once('close', resolve))
  for (const p of pairs.values()) clearTimeout(p.timer)
  pairs.clear()
  for (const s of forwards) s.destroy()
}

function writeError(stream: SpdyStream | undefined, message: string): void {
  if (!stream || stream.destroyed || stream.localClosed) return
  stream.write(message)
}

function fail(pair: Pair, message: string): void {
  writeError(pair.error, message)
  pair.error?.end()
  pair.data?.reset()
}

/**
 * Joins the data stream to localhost:port of the pod's network, IPv4 then IPv6
 * (as containerd dials): inside the pod's network namespace through the
 * runtime when it has one of its own, else from here (the host's network, or
 * a runtime that cannot enter it: the pod's own IP).
 */
function forward(target: PodTarget, pair: Required<Pair>, forwards: Set<Duplex>, streaming: ContainerStreaming | undefined): void {
  const port = Number(pair.data.header('port'))
  const {data, error} = pair
  const failed = (attempts: DialAttempt[], host?: string) => fail(pair, dialFailure(target, port, attempts, host))
  const inPod = streaming?.dialPodPort?.(target.pod.metadata?.uid ?? '', port, DefaultDialTimeoutMs)
  if (inPod) {
    inPod.then(
      (conn) => {
        // The stream went while the dial was under way (the client gave up): the connection goes too.
        if (data.destroyed) return conn.destroy()
        forwards.add(conn)
        join(data, error, conn, () => forwards.delete(conn))
      },
      (e: unknown) => failed(e instanceof DialError ? e.attempts : [{family: 4, code: (e as NodeJS.ErrnoException).code ?? 'EIO'}]),
    )
    return
  }
  const attempts: DialAttempt[] = []
  const podIP = ownPodIP(target)
  const attempt = (family: 4 | 6) => {
    const host = podIP ?? (family === 4 ? '127.0.0.1' : '::1')
    const tcp = connect({host, port, allowHalfOpen: true, timeout: DefaultDialTimeoutMs})
    forwards.add(tcp)
    let connected = false
    tcp.once('timeout', () => {
      if (!connected) tcp.destroy(Object.assign(new Error('i/o timeout'), {code: 'ETIMEDOUT'}))
    })
    tcp.once('error', (e: NodeJS.ErrnoException) => {
      if (connected) return
      forwards.delete(tcp)
      attempts.push({family, code: e.code ?? e.message})
      if (family === 4 && !podIP && !data.destroyed) return attempt(6)
      failed(attempts, podIP)
    })
    tcp.once('connect', () => {
      connected = true
      tcp.setTimeout(0)
      tcp.setNoDelay(true)
      join(data, error, tcp, () => forwards.delete(tcp))
    })
  }
  if (!data.destroyed) attempt(4)
}

/** The kubelet's words for a dial that failed: each family's address and reason, as Go's net.Dial says them. */
function dialFailure(target: PodTarget, port: number, attempts: DialAttempt[], podIP?: string): string {
  const words = attempts.map((a) => (a.family === 4 ? `IPv4: dial tcp4 ${podIP ?? '127.0.0.1'}:${port}: ${dialReason(a.code)}` : `IPv6 dial tcp6 [::1]:${port}: ${dialReason(a.code)}`))
  return `error forwarding port ${port} to pod ${target.namespace}/${target.name}, uid ${target.pod.metadata?.uid ?? ''}: failed to connect to localhost:${port}, ${words.join(' ')}`
}

/** The pod's own IPv4 address when it is not on the host network; undefined otherwise. */
function ownPodIP(target: PodTarget): string | undefined {
  const status = target.pod.status
  const ip = status?.podIP
  return ip && !target.pod.spec?.hostNetwork && ip !== status?.hostIP ? ip : undefined
}

function dialReason(code: string): string {
  if (code === 'ECONNREFUSED') return 'connect: connection refused'
  if (code === 'ETIMEDOUT') return 'i/o timeout'
  if (code === 'EADDRNOTAVAIL') return 'connect: cannot assign requested address'
  if (code === 'ENETUNREACH') return 'connect: network is unreachable'
  return code
}

/** Copies both ways; when either side is gone the other is closed, then the error stream ends empty. */
function join(data: SpdyStream, error: SpdyStream, tcp: Duplex, done: () => void): void {
  data.pipe(tcp)
  tcp.pipe(data)
  tcp.on('error', () => undefined)
  data.on('error', () => undefined)
  const finish = () => {
    data.unpipe(tcp)
    tcp.unpipe(data)
    tcp.destroy()
    if (!data.destroyed) data.end()
    if (!error.destroyed) error.end()
    done()
  }
  tcp.once('close', finish)
  // A reset (or the session ending) closes the stream without 'end'.
  data.once('close', () => tcp.destroy())
}

export const PortForwardRoute: StreamingRoute = {kind: 'streaming', prefix: '/portForward/', methods: StreamingMethods, serve: servePortForward}
