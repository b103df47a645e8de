import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import http2 from 'node:http2'
import net from 'node:net'
import type {AddressInfo} from 'node:net'
import {grpcHealthCheck, healthCheckRequest, servingStatus} from '../../src/emulator/runtime/probes/grpc.js'

/** A length-prefixed HealthCheckResponse{status}. */
const response = (status: number) => Buffer.from([0, 0, 0, 0, 2, 0x08, status])

describe("gRPC health probe (the kubelet's pkg/probe/grpc)", () => {
  let server: http2.Http2Server
  let port: number
  const seen: string[] = []

  beforeAll(async () => {
    // A grpc.health.v1 server on loopback: SERVING for "" and "ready", NOT_SERVING for "down", silence for "slow".
    server = http2.createServer()
    server.on('stream', (stream, headers) => {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => {
        const body = Buffer.concat(chunks)
        const service = body.length > 7 ? body.subarray(7).toString() : ''
        seen.push(`${headers[':path']} ${headers['content-type']} "${service}"`)
        if (headers[':path'] !== '/grpc.health.v1.Health/Check') {
          stream.respond({':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'unknown service'}, {endStream: true})
          return
        }
        if (service === 'slow') return
        stream.respond({':status': 200, 'content-type': 'application/grpc'}, {waitForTrailers: true})
        stream.on('wantTrailers', () => stream.sendTrailers({'grpc-status': '0'}))
        stream.end(response(service === 'down' ? 2 : 1))
      })
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as AddressInfo).port
  })
  afterAll(async () => {
    await new Promise((r) => server.close(r))
  })

  test('SERVING is healthy; the request is the standard Check with the service name', async () => {
    expect(await grpcHealthCheck('127.0.0.1', port, '', 1000)).toEqual({result: 'success', output: 'service healthy'})
    expect(await grpcHealthCheck('127.0.0.1', port, 'ready', 1000)).toEqual({result: 'success', output: 'service healthy'})
    expect(seen.slice(0, 2)).toEqual(['/grpc.health.v1.Health/Check application/grpc ""', '/grpc.health.v1.Health/Check application/grpc "ready"'])
  })

  test("any other status fails with the kubelet's message", async () => {
    expect(await grpcHealthCheck('127.0.0.1', port, 'down', 1000)).toEqual({result: 'failure', output: 'service unhealthy (responded with "NOT_SERVING")'})
  })

  test('no answer within the timeout, nothing listening: failures that say so', async () => {
    expect(await grpcHealthCheck('127.0.0.1', port, 'slow', 300)).toEqual({result: 'failure', output: 'timeout: health rpc did not complete within 300ms'})
    const closed = net.createServer()
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r))
    const free = (closed.address() as AddressInfo).port
    await new Promise((r) => closed.close(r))
    const refused = await grpcHealthCheck('127.0.0.1', free, '', 1000)
    expect(refused.result).toBe('failure')
    expect(refused.output).toContain(`dial tcp 127.0.0.1:${free}: connect: connection refused`)
  })

  test('the messages on the wire: the request, and a response without the status field is UNKNOWN', () => {
    expect([...healthCheckRequest('')]).toEqual([0, 0, 0, 0, 0])
    expect([...healthCheckRequest('ab')]).toEqual([0, 0, 0, 0, 4, 0x0a, 2, 0x61, 0x62])
    expect(servingStatus(response(3))).toBe('SERVICE_UNKNOWN')
    expect(servingStatus(Buffer.from([0, 0, 0, 0, 0]))).toBe('UNKNOWN')
  })
})
