import type {V1Pod} from '@kubernetes/client-node'
import type {IncomingMessage} from 'node:http'
import type {Socket} from 'node:net'
import type {ContainerStreaming} from '../../provider/streaming.js'
import type {PodLister, RunningCheck} from '../sources.js'
import {nameProblem, pathSegments} from '../validate.js'
import {isSpdyUpgrade, negotiate} from '../spdy/upgrade.js'

/**
 * What exec, attach and port-forward share before the connection is
 * upgraded: the path, the pod, and the kubelet's checks and messages.
 */

/** One streaming request: a raw socket when it asked to upgrade, otherwise only a way to answer. */
export interface StreamingConnection {
  req: IncomingMessage
  url: URL
  socket?: Socket
  head?: Buffer
  respond(status: number, body: string, headers?: Record<string, string>): void
}

/** An upgraded connection the server must be able to cut when it stops. */
export interface Cuttable {
  destroy(): void
}

export interface StreamingDeps {
  pods: PodLister
  isRunning: RunningCheck
  /** The runtime's exec/attach, once the node has one. */
  streaming: () => ContainerStreaming | undefined
  /** Upgraded connections: added when upgraded (before any stream exists), removed when closed. */
  sessions: Set<Cuttable>
  creationTimeoutMs?: number
  idleTimeoutMs?: number
}

export interface PodTarget {
  namespace: string
  name: string
  uid?: string
  pod: V1Pod
}

/** The kubelet's pod full name (kubecontainer.GetPodFullName). */
export function podFullName(pod: V1Pod): string {
  return `${pod.metadata?.name}_${pod.metadata?.namespace}`
}

/**
 * Splits /<prefix>/{namespace}/{pod}[/{uid}]/{container...} and finds the pod.
 * `rest` is how many segments follow the pod besides the optional uid.
 */
export function resolveTarget(conn: StreamingConnection, deps: StreamingDeps, prefix: string, rest: 0 | 1): {target: PodTarget; tail: string[]} | undefined {
  const segs = pathSegments(conn.url.pathname, prefix)?.filter((s, i, all) => s !== '' || i < all.length - 1)
  if (!segs) {
    conn.respond(400, 'invalid path: bad percent-encoding')
    return undefined
  }
  if (segs.length !== 2 + rest && segs.length !== 3 + rest) {
    conn.respond(404, '404 page not found')
    return undefined
  }
  const [namespace, name] = segs
  const uid = segs.length === 3 + rest ? segs[2] : undefined
  const tail = segs.slice(uid === undefined ? 2 : 3)
  const problem = nameProblem('namespace', namespace) ?? nameProblem('pod', name) ?? tail.map((c) => nameProblem('container', c)).find(Boolean)
  if (problem) {
    conn.respond(400, problem)
    return undefined
  }
  const pod = deps.pods().find((p) => p.metadata?.namespace === namespace && p.metadata?.name === name)
  if (!pod) {
    conn.respond(404, 'pod does not exist')
    return undefined
  }
  return {target: {namespace, name, uid, pod}, tail}
}

/** What exec and attach act on: the pod, one of its containers, and the runtime that runs it. */
export interface ContainerTarget {
  target: PodTarget
  container: string
  runtime: ContainerStreaming
  ref: {namespace: string; pod: string; container: string}
  /** The request named the pod's UID, or none (a UID of another pod instance does not match). */
  uidMatches: boolean
}

/** resolveTarget for `/<verb>/{ns}/{pod}[/{uid}]/{container}`, plus the runtime; undefined once it has answered. */
export function resolveContainer(conn: StreamingConnection, deps: StreamingDeps, prefix: string): ContainerTarget | undefined {
  const resolved = resolveTarget(conn, deps, prefix, 1)
  if (!resolved) return undefined
  const {target, tail} = resolved
  const container = tail[0]
  const runtime = deps.streaming()
  if (!runtime) {
    conn.respond(501, '501 not implemented')
    return undefined
  }
  return {
    target,
    container,
    runtime,
    ref: {namespace: target.namespace, pod: target.name, container},
    uidMatches: target.uid === undefined || target.uid === target.pod.metadata?.uid,
  }
}

/** The method, the upgrade headers and protocol negotiation; undefined once it has answered. */
export function negotiateUpgrade(conn: StreamingConnection, deps: StreamingDeps, protocols: readonly string[]): {socket: Socket; head: Buffer; protocol: string} | undefined {
  const n = negotiate(conn.req, protocols)
  if (!n.ok) {
    conn.respond(n.status, n.message, n.headers)
    return undefined
  }
  if (!conn.socket || !isSpdyUpgrade(conn.req)) {
    const websocket = String(conn.req.headers.upgrade ?? '').toLowerCase() === 'websocket'
    conn.respond(400, websocket ? 'unable to upgrade: only SPDY/3.1 streaming is supported by this node' : 'unable to upgrade: missing upgrade headers in request')
    return undefined
  }
  const socket = conn.socket
  const cut: Cuttable = {destroy: () => socket.destroy()}
  deps.sessions.add(cut)
  socket.once('close', () => deps.sessions.delete(cut))
  return {socket, head: conn.head ?? Buffer.alloc(0), protocol: n.protocol}
}
