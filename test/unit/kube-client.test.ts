import {describe, expect, test} from '@jest/globals'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import * as https from 'node:https'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {TLSSocket} from 'node:tls'
import {kubeconfigYaml} from '../../src/cluster/cluster-pki.js'
import {createCa, issueCert} from '../../src/common/pki.js'
import {makeClients, RequestCounter, resourceOf} from '../../src/emulator/kube/client.js'

describe('resourceOf', () => {
  test('names the resource and subresource of an API path', () => {
    expect(resourceOf('https://h:6443/api/v1/namespaces/ns/pods/p/status?dryRun=All')).toBe('pods/status')
    expect(resourceOf('https://h:6443/api/v1/namespaces/default/events')).toBe('events')
    expect(resourceOf('https://h/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1')).toBe('leases')
    expect(resourceOf('https://h/api/v1/nodes/n1/status')).toBe('nodes/status')
    expect(resourceOf('/api/v1/nodes')).toBe('nodes')
  })
})

describe('RequestCounter', () => {
  test('counts by method and by resource', () => {
    const c = new RequestCounter()
    c.record('PATCH', 'https://h/api/v1/namespaces/a/pods/x/status')
    c.record('PATCH', 'https://h/api/v1/namespaces/b/pods/y/status')
    c.record('PUT', 'https://h/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n')
    expect(c.total).toBe(3)
    expect(c.byMethod.get('PATCH')).toBe(2)
    expect(c.byResource.get('PATCH pods/status')).toBe(2)
    expect(c.byResource.get('PUT leases')).toBe(1)
  })
})

describe('connection reuse', () => {
  /** An HTTPS server that answers every request with an empty APIResourceList and counts TLS connections. */
  async function server(dir: string) {
    const ca = await createCa(join(dir, 'pki'), 'test-ca')
    const serving = await issueCert(join(dir, 'pki'), ca, {name: 'server', commonName: 'server', sans: ['127.0.0.1'], usage: 'server'})
    const client = await issueCert(join(dir, 'pki'), ca, {name: 'client', commonName: 'client', usage: 'client'})
    let connections = 0
    const s = https.createServer({cert: readFileSync(serving.cert), key: readFileSync(serving.key), ca: readFileSync(ca.cert), requestCert: true}, (req, res) => {
      res.setHeader('Content-Type', 'application/json')
      // Two writes: a chunked response, as the API server sends.
      const body = JSON.stringify({kind: 'APIResourceList', groupVersion: 'v1', resources: [], clientCN: (req.socket as TLSSocket).getPeerCertificate().subject?.CN})
      res.write(body.slice(0, 10))
      setImmediate(() => res.end(body.slice(10)))
    })
    s.on('secureConnection', () => connections++)
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
    const port = (s.address() as AddressInfo).port
    const kubeconfig = join(dir, 'kubeconfig')
    writeFileSync(kubeconfig, kubeconfigYaml(`https://127.0.0.1:${port}`, ca.cert, client, 'client'))
    return {s, kubeconfig, connections: () => connections}
  }

  test('requests share kept-alive TLS connections (client-node alone opens one per request), still authenticated with the client certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-pool-'))
    const srv = await server(dir)
    const clients = await makeClients({kubeconfig: srv.kubeconfig, qps: 0})
    try {
      for (let i = 0; i < 20; i++) await clients.core.getAPIResources()
      expect(srv.connections()).toBe(1)
      // A burst: parallel requests open sockets, kept for the next burst (none fails on a reused socket).
      await Promise.all(Array.from({length: 60}, () => clients.core.getAPIResources()))
      const afterBurst = srv.connections()
      await Promise.all(Array.from({length: 30}, () => clients.core.getAPIResources()))
      expect(srv.connections()).toBe(afterBurst)
      expect(clients.counter.total).toBe(110)
      // Without the pool, the same requests through client-node's own authentication.
      const before = srv.connections()
      const plain = clients.kc.makeApiClient((await import('@kubernetes/client-node')).CoreV1Api)
      for (let i = 0; i < 5; i++) await plain.getAPIResources()
      expect(srv.connections() - before).toBe(5)
    } finally {
      clients.close()
      srv.s.closeAllConnections()
      srv.s.close()
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
