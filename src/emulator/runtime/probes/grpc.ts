import http2 from 'node:http2'
import {goDuration} from '../container/crash-loop.js'

/**
 * The kubelet's gRPC probe (pkg/probe/grpc): one call of the standard
 * health service, grpc.health.v1.Health/Check, over plaintext HTTP/2 (h2c),
 * with the probe's service name; SERVING is healthy, anything else a failure
 * with the kubelet's message. Written on node:http2 because the protocol is
 * two protobuf fields: a gRPC library would be a dependency for one call.
 */

/** HealthCheckResponse.ServingStatus, by number. */
const ServingStatus = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN']
/** gRPC status codes, by number, as grpc-go names them in its errors. */
const Codes = [
  'OK',
  'Canceled',
  'Unknown',
  'InvalidArgument',
  'DeadlineExceeded',
  'NotFound',
  'AlreadyExists',
  'PermissionDenied',
  'ResourceExhausted',
  'FailedPrecondition',
  'Aborted',
  'OutOfRange',
  'Unimplemented',
  'Internal',
  'Unavailable',
  'DataLoss',
  'Unauthenticated',
]
const Unimplemented = 12

export type GrpcProbeOutcome = {result: 'success' | 'failure'; output: string}

/** A length-prefixed gRPC message: HealthCheckRequest{service} (field 1, a string; empty: no field). */
export function healthCheckRequest(service: string): Buffer {
  const name = Buffer.from(service, 'utf8')
  const message = name.length ? Buffer.concat([Buffer.from([0x0a]), varint(name.length), name]) : Buffer.alloc(0)
  const prefix = Buffer.alloc(5)
  prefix.writeUInt32BE(message.length, 1)
  return Buffer.concat([prefix, message])
}

function varint(n: number): Buffer {
  const out: number[] = []
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  out.push(n)
  return Buffer.from(out)
}

/** HealthCheckResponse's status from the first length-prefixed message (field 1, a varint; absent: UNKNOWN). */
export function servingStatus(body: Buffer): string {
  if (body.length < 5) return ServingStatus[0]
  const message = body.subarray(5, 5 + body.readUInt32BE(1))
  for (let i = 0; i < message.length;) {
    const key = message[i++]
    if (key === 0x08) {
      let v = 0
      let shift = 0
      for (; i < message.length; shift += 7) {
        const b = message[i++]
        v |= (b & 0x7f) << shift
        if (!(b & 0x80)) break
      }
      return ServingStatus[v] ?? String(v)
    }
    // Another field: stop; the health response has only the one.
    break
  }
  return ServingStatus[0]
}

function connectError(addr: string, error: NodeJS.ErrnoException): string {
  // A stream cancelled because its session failed carries the session's error as its cause.
  const e = (error.cause as NodeJS.ErrnoException | undefined) ?? error
  const why = e.code === 'ECONNREFUSED' ? 'connect: connection refused' : e.message
  return `error: health rpc probe failed: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${addr}: ${why}"`
}

export function grpcHealthCheck(host: string, port: number, service: string, timeoutMs: number): Promise<GrpcProbeOutcome> {
  const addr = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
  return new Promise((resolve) => {
    let settled = false
    const session = http2.connect(`http://${addr}`)
    const finish = (o: GrpcProbeOutcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      session.destroy()
      resolve(o)
    }
    const timer = setTimeout(() => finish({result: 'failure', output: `timeout: health rpc did not complete within ${goDuration(timeoutMs)}`}), timeoutMs)
    session.once('error', (e: NodeJS.ErrnoException) => finish({result: 'failure', output: connectError(addr, e)}))
    const req = session.request({':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers'})
    const chunks: Buffer[] = []
    let grpcStatus: string | undefined
    let grpcMessage = ''
    const readStatus = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status'])
      if (h['grpc-message'] !== undefined) grpcMessage = decodeURIComponent(String(h['grpc-message']))
    }
    req.on('response', readStatus)
    req.on('trailers', readStatus)
    req.on('data', (c: Buffer) => chunks.push(c))
    req.once('error', (e: NodeJS.ErrnoException) => finish({result: 'failure', output: connectError(addr, e)}))
    req.once('end', () => {
      const code = Number(grpcStatus ?? 2)
      if (code === Unimplemented) return finish({result: 'failure', output: `error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${grpcMessage}`})
      if (code !== 0) return finish({result: 'failure', output: `error: health rpc probe failed: rpc error: code = ${Codes[code] ?? code} desc = ${grpcMessage}`})
      const status = servingStatus(Buffer.concat(chunks))
      finish(status === 'SERVING' ? {result: 'success', output: 'service healthy'} : {result: 'failure', output: `service unhealthy (responded with "${status}")`})
    })
    req.end(healthCheckRequest(service))
  })
}
