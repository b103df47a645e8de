import {describe, expect, test} from '@jest/globals'
import {endpointCheck, type NodeEndpointFacts, relayCheck} from '../../src/cli/doctor-endpoint.js'
import {judge} from '../../src/emulator/relay/reach.js'
import {doctorText} from '../../src/ui/doctor-output.js'

/** A node as doctor finds it, with the API server's answer to GET nodes/<node>/proxy/healthz given as status and body. */
function node(status: number, body: string, extra: Partial<NodeEndpointFacts> = {}): NodeEndpointFacts {
  return {name: 'vnode-laptop', address: '192.168.1.20', port: 10250, reach: judge(status, body), ...extra}
}
const apiStatus = (code: number, message: string) => JSON.stringify({kind: 'Status', apiVersion: 'v1', status: 'Failure', message, code})

describe("doctor's row per node: the failure the API server's answer names, and its fix", () => {
  test('reached: directly, or through its relay', () => {
    expect(endpointCheck(node(200, 'ok'))).toEqual({
      id: 'kubelet-endpoint',
      capability: 'node vnode-laptop',
      verdict: 'ok',
      why: 'the API server reaches its kubelet API at 192.168.1.20:10250 directly',
    })
    expect(endpointCheck(node(200, 'ok', {address: '10.244.1.7', relay: 'vnode-system/vnode-relay-vnode-laptop'})).why).toBe(
      'the API server reaches its kubelet API at 10.244.1.7:10250 through the relay vnode-system/vnode-relay-vnode-laptop',
    )
    // Any kubelet answer, even a refusal, means the connection was made.
    expect(endpointCheck(node(401, 'Unauthorized')).verdict).toBe('ok')
  })

  test('not reached, no relay: the relay is the fix; a port other than 443 and 10250 is named', () => {
    const refused = endpointCheck(node(500, apiStatus(500, 'error trying to reach service: dial tcp 192.168.1.20:10250: connect: connection refused')))
    expect(refused).toMatchObject({
      verdict: 'missing',
      why: 'the API server cannot reach 192.168.1.20:10250: error trying to reach service: dial tcp 192.168.1.20:10250: connect: connection refused',
      fix: {text: "a relay pod in the cluster carries the API server's connections", command: 'kubectl vnode up --relay on'},
    })
    expect(refused.cost).toMatch(/^kubectl logs, exec/)
    const timeout = endpointCheck(node(503, apiStatus(503, 'dial tcp 192.168.1.20:10266: i/o timeout'), {port: 10266}))
    expect(timeout.fix?.text).toBe("a relay pod in the cluster carries the API server's connections (a firewall that lets only 443 and 10250 through stops port 10266: --port 10250 may pass it)")
  })

  test('a Hostname address the API server dials first: not resolving, or resolving to loopback', () => {
    const loopback = endpointCheck(node(400, apiStatus(400, 'address not allowed'), {hostname: 'laptop'}))
    expect(loopback).toMatchObject({
      verdict: 'missing',
      why: "the API server dials the node's Hostname address laptop first (--kubelet-preferred-address-types), which it cannot use: address not allowed",
      fix: {command: 'kubectl vnode up --relay on'},
    })
    expect(endpointCheck(node(500, apiStatus(500, 'lookup laptop on 10.96.0.10:53: no such host'), {hostname: 'laptop'})).why).toMatch(/^the API server dials the node's Hostname address laptop first/)
    // Without a Hostname address the same refusal is not blamed on one.
    expect(endpointCheck(node(400, apiStatus(400, 'address not allowed'))).why).toMatch(/^the API server cannot reach/)
  })

  test('a verifying API server and a self-signed certificate: the per-request skip is named', () => {
    const r = endpointCheck(node(500, apiStatus(500, 'error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority'), {hostname: 'laptop'}))
    expect(r.why).toBe(
      "the API server verifies kubelet serving certificates (--kubelet-certificate-authority) and rejects the node's: error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority",
    )
    expect(r.fix?.command).toBe('kubectl logs --insecure-skip-tls-verify-backend <pod>')
  })

  test("a refused certificate the cluster never issued or nobody approved: the node's annotation names the cause and its cure", () => {
    const x509 = apiStatus(500, 'error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority')
    const neverIssued = endpointCheck(node(500, x509, {servingCert: 'self-signed: CSR csr-abc12 approved but not issued within 5 s (signer kubernetes.io/kubelet-serving)'}))
    expect(neverIssued.why).toContain("the cluster approved the node's kubelet-serving CSR but never issued it (CSR csr-abc12 approved but not issued within 5 s")
    expect(neverIssued.why).toContain('as EKS signs them only for the nodes it made')
    expect(neverIssued.fix?.command).toBe('kubectl logs --insecure-skip-tls-verify-backend <pod>')
    const unapproved = endpointCheck(
      node(500, x509, {servingCert: "self-signed: CSR csr-xyz9 not approved: vnode's user cannot approve it (forbidden) within 5 s (signer kubernetes.io/kubelet-serving)"}),
    )
    expect(unapproved.why).toContain("the node's kubelet-serving CSR csr-xyz9 was never approved")
    expect(unapproved.fix?.command).toBe('kubectl certificate approve csr-xyz9')
    // A node that serves the cluster's and is still refused: the general row.
    expect(endpointCheck(node(500, x509, {servingCert: 'cluster'})).fix?.command).toBe('kubectl logs --insecure-skip-tls-verify-backend <pod>')
  })

  test('the reach check marks a refused certificate as untrusted (up stays direct: a relay carries the same TLS), and nothing else', () => {
    const x509 = 'error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority'
    expect(judge(500, apiStatus(500, x509))).toEqual({reachable: false, status: 500, why: x509, untrusted: true})
    expect(judge(503, apiStatus(503, 'error trying to reach service: dial tcp 192.0.2.2:10250: connect: connection refused')).untrusted).toBeUndefined()
  })

  test("k3s's egress tunnel: 502 for a node it does not know", () => {
    const r = endpointCheck(node(502, apiStatus(502, 'error dialing backend: failed to find Session for client vnode-laptop')))
    expect(r.why).toMatch(/^the API server's egress tunnel answered 502 \(Bad Gateway\)/)
    expect(r.fix?.text).toContain('--egress-selector-mode disabled')
  })

  test('a relay that does not answer: describe its pod; a refused question is not a verdict on the node', () => {
    const r = endpointCheck(node(503, apiStatus(503, 'dial tcp 10.244.1.7:10250: connect: no route to host'), {address: '10.244.1.7', relay: 'vnode-system/vnode-relay-x'}))
    expect(r).toMatchObject({verdict: 'missing', why: 'the relay vnode-system/vnode-relay-x at 10.244.1.7:10250 does not answer: dial tcp 10.244.1.7:10250: connect: no route to host'})
    expect(r.fix?.command).toBe('kubectl -n vnode-system describe pod vnode-relay-x')
    const forbidden = endpointCheck(node(403, apiStatus(403, 'nodes "vnode-laptop" is forbidden: User "dev" cannot get resource "nodes/proxy"')))
    expect(forbidden).toMatchObject({verdict: 'missing', why: expect.stringMatching(/^cannot tell: the API server refused the check/), fix: {text: 'check with a user allowed to get nodes/proxy'}})
    expect(forbidden.cost).toBeUndefined()
  })

  test('the text report prints the node row with its cost and fix', () => {
    const check = endpointCheck(node(500, apiStatus(500, 'dial tcp 192.168.1.20:10250: connect: connection refused')))
    const text = doctorText({host: {os: 'Debian', family: 'debian', uid: 0}, checks: [check], mode: 'mode: x', ok: true}, {color: false})
    expect(text).toBe(
      [
        'host: Debian, uid 0',
        'node vnode-laptop  missing  the API server cannot reach 192.168.1.20:10250: dial tcp 192.168.1.20:10250: connect: connection refused',
        '                            without it: kubectl logs, exec, attach, port-forward and kubectl top do not reach the pods of this node',
        "                            fix: a relay pod in the cluster carries the API server's connections",
        '                                 kubectl vnode up --relay on',
        'mode: x',
        '',
      ].join('\n'),
    )
  })
})

describe("doctor's relay row", () => {
  const facts = {namespace: 'vnode-system', denied: [], schedulable: 2}
  test('off, not needed on loopback, or ok with rights and nodes', () => {
    expect(relayCheck('off', false, facts)).toMatchObject({verdict: 'off', fix: {text: 'drop --relay off'}})
    expect(relayCheck('auto', true, undefined)).toMatchObject({verdict: 'ok', why: expect.stringMatching(/^not needed here: the API server is on this host/)})
    expect(relayCheck('on', true, facts)).toMatchObject({verdict: 'ok', why: 'up --relay on makes a relay pod: this user may make it in vnode-system, and 2 nodes may run it'})
    expect(relayCheck('auto', false, undefined).why).toMatch(/^not known/)
    // A user who may not list nodes: the rights still decide, the nodes are not claimed either way.
    expect(relayCheck('on', false, {namespace: 'team', denied: []})).toMatchObject({verdict: 'ok', why: expect.stringMatching(/which nodes may run it is not known \(this user may not list nodes\)$/)})
  })

  test('rights missing or no node to run it: missing, unmet only when asked for with --relay on', () => {
    const denied = relayCheck('auto', false, {namespace: 'team', denied: ['create pods/portforward'], schedulable: 0})
    expect(denied).toMatchObject({
      verdict: 'missing',
      why: 'this user may not create pods/portforward in namespace team; no node can run the relay pod (none Ready and schedulable without a NoSchedule taint)',
      fix: {text: 'a Role in team allowing create pods/portforward, or --relay-namespace a namespace where you may; a Ready node without taints, or --relay-node-selector one the relay may run on'},
      unmet: false,
    })
    expect(relayCheck('on', false, {namespace: 'team', denied: ['create pods'], schedulable: 1}).unmet).toBe(true)
  })
})
