import {afterAll, describe, expect, test} from '@jest/globals'
import type {V1CertificateSigningRequest} from '@kubernetes/client-node'
import {execFileSync} from 'node:child_process'
import {X509Certificate} from 'node:crypto'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {connect} from 'node:tls'
import {KubeletServer} from '../../src/emulator/server/server.js'
import type {ServingCertSource} from '../../src/emulator/server/serving-certs.js'
import {join} from 'node:path'
import {createCa, createKeyAndRequest} from '../../src/common/pki.js'
import {
  approvedBy,
  ClusterServingCertName,
  csrAnswer,
  type CsrApi,
  keptClusterCert,
  KubeletServingSigner,
  requestServingCert,
  servingCsr,
  servingSubject,
} from '../../src/emulator/server/serving-csr.js'

const root = mkdtempSync(join(tmpdir(), 'vnode-csr-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))
let n = 0
const freshDir = () => join(root, String(++n))

/** What a cluster's signer does with a request: a certificate from ca with the request's names. */
async function sign(requestPem: string, caDir = join(root, 'ca')): Promise<string> {
  const ca = await createCa(caDir, 'test-cluster-ca')
  const dir = freshDir()
  mkdirSync(dir, {recursive: true})
  writeFileSync(join(dir, 'r.csr'), requestPem)
  execFileSync(
    'openssl',
    ['x509', '-req', '-in', join(dir, 'r.csr'), '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', '7', '-days', '365', '-copy_extensions', 'copyall', '-out', join(dir, 'r.crt')],
    {stdio: 'ignore'},
  )
  return readFileSync(join(dir, 'r.crt'), 'utf8')
}

const sans = ['n1', '192.0.2.7', '10.1.2.3']

describe('the kubelet-serving CSR', () => {
  test('the request: CN system:node:<node>, O system:nodes, the names and addresses; the object: signer, EC usages; the key 0600 in a 0700 dir', async () => {
    const dir = freshDir()
    const {commonName, organizations} = servingSubject('n1')
    const {key, request} = await createKeyAndRequest(dir, 'k', commonName, organizations, sans)
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    expect(statSync(key).mode & 0o777).toBe(0o600)
    const text = execFileSync('openssl', ['req', '-noout', '-text'], {input: request}).toString()
    expect(text).toMatch(/Subject: O\s?=\s?system:nodes, CN\s?=\s?system:node:n1/)
    expect(text).toContain('DNS:n1, IP Address:192.0.2.7, IP Address:10.1.2.3')
    expect(text).toContain('id-ecPublicKey')
    const csr = servingCsr('n1', request)
    expect(csr.spec.signerName).toBe(KubeletServingSigner)
    expect(csr.spec.usages).toEqual(['digital signature', 'server auth'])
    expect(Buffer.from(csr.spec.request, 'base64').toString()).toBe(request)
    expect(csr.metadata?.annotations).toEqual({'vnode.dev/node': 'n1'})
  })

  test('the approval adds an Approved condition and keeps the others', () => {
    const csr: V1CertificateSigningRequest = {spec: {request: '', signerName: KubeletServingSigner}, status: {conditions: [{type: 'Other', status: 'True'}]}}
    const approved = approvedBy(csr, 'n1', new Date(0))
    expect(approved.status?.conditions?.map((c) => [c.type, c.status])).toEqual([
      ['Other', 'True'],
      ['Approved', 'True'],
    ])
    expect(approved.status?.conditions?.[1].reason).toBe('VnodeNodeServingCert')
  })

  test('the answer: pending, approved, denied, failed; an issued certificate only when it is for the key and covers every name', async () => {
    const dir = freshDir()
    const {key, request} = await createKeyAndRequest(dir, 'k', 'system:node:n1', ['system:nodes'], sans)
    const keyPem = readFileSync(key, 'utf8')
    const base: V1CertificateSigningRequest = servingCsr('n1', request)
    const withStatus = (status: V1CertificateSigningRequest['status']) => ({...base, status})
    expect(csrAnswer(base, keyPem, sans)).toEqual({state: 'pending', approved: false})
    expect(csrAnswer(withStatus({conditions: [{type: 'Approved', status: 'True'}]}), keyPem, sans)).toEqual({state: 'pending', approved: true})
    expect(csrAnswer(withStatus({conditions: [{type: 'Denied', status: 'True', reason: 'Nope', message: 'not here'}]}), keyPem, sans)).toEqual({state: 'refused', why: 'denied (Nope: not here)'})
    expect(
      csrAnswer(
        withStatus({
          conditions: [
            {type: 'Approved', status: 'True'},
            {type: 'Failed', status: 'True', reason: 'SignerValidationFailure'},
          ],
        }),
        keyPem,
        sans,
      ),
    ).toEqual({
      state: 'refused',
      why: 'failed (SignerValidationFailure)',
    })
    const certPem = await sign(request)
    const issued = withStatus({conditions: [{type: 'Approved', status: 'True'}], certificate: Buffer.from(certPem).toString('base64')})
    expect(csrAnswer(issued, keyPem, sans)).toEqual({state: 'issued', certPem})
    // A name the certificate does not cover (the relay's new IP), and another key.
    expect(csrAnswer(issued, keyPem, [...sans, '10.9.9.9'])).toMatchObject({state: 'refused', why: expect.stringContaining('does not cover')})
    const other = await createKeyAndRequest(dir, 'other', 'system:node:n1', ['system:nodes'], sans)
    expect(csrAnswer(issued, readFileSync(other.key, 'utf8'), sans)).toEqual({state: 'refused', why: 'issued a certificate for another key'})
    expect(csrAnswer(withStatus({certificate: Buffer.from('junk').toString('base64')}), keyPem, sans)).toMatchObject({state: 'refused', why: expect.stringContaining('does not parse')})
  })

  /** A CSR API that keeps one object, signs it on the nth read once approved, and records what was called. */
  function fakeApi(o: {approve: boolean; issueOnRead?: number}) {
    const calls: string[] = []
    let csr: V1CertificateSigningRequest | undefined
    let reads = 0
    const api: CsrApi = {
      createCertificateSigningRequest: async ({body}: {body: V1CertificateSigningRequest}) => {
        calls.push('create')
        csr = {...body, metadata: {...body.metadata, name: 'vnode-serving-abc'}}
        return csr
      },
      replaceCertificateSigningRequestApproval: async ({body}: {name: string; body: V1CertificateSigningRequest}) => {
        calls.push('approve')
        if (!o.approve) throw Object.assign(new Error('HTTP 403'), {code: 403, body: JSON.stringify({message: 'signers.certificates.k8s.io "kubernetes.io/kubelet-serving" is forbidden'})})
        csr = body
        return csr
      },
      readCertificateSigningRequest: async () => {
        calls.push('read')
        reads++
        if (o.issueOnRead && reads >= o.issueOnRead && !csr!.status?.certificate) {
          const cert = await sign(Buffer.from(csr!.spec.request, 'base64').toString())
          csr = {...csr!, status: {...csr!.status, certificate: Buffer.from(cert).toString('base64')}}
        }
        return csr!
      },
      deleteCertificateSigningRequest: async ({name}: {name: string}) => {
        calls.push(`delete ${name}`)
        return {}
      },
    } as unknown as CsrApi
    return {api, calls}
  }

  test('requestServingCert: created, approved, issued on a later read; kept in the state dir (key 0600) and the CSR deleted', async () => {
    const stateDir = freshDir()
    const {api, calls} = fakeApi({approve: true, issueOnRead: 2})
    const r = await requestServingCert({api, cluster: 'https://a:6443', stateDir, nodeName: 'n1', sans, waitMs: 5000, pollIntervalMs: 10})
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.csrName).toBe('vnode-serving-abc')
    expect(calls).toEqual(['create', 'approve', 'read', 'read', 'delete vnode-serving-abc'])
    const x = new X509Certificate(r.cert)
    expect(x.issuer).toBe('CN=test-cluster-ca')
    expect(x.checkIP('10.1.2.3')).toBe('10.1.2.3')
    expect(statSync(join(stateDir, 'pki', `${ClusterServingCertName}.key`)).mode & 0o777).toBe(0o600)
    expect(existsSync(join(stateDir, 'pki', `${ClusterServingCertName}-pending.key`))).toBe(false)
    // Kept for the next start while it covers the names; not for a new address.
    expect((await keptClusterCert(stateDir, 'https://a:6443', sans, 0))?.cert.equals(r.cert)).toBe(true)
    expect(await keptClusterCert(stateDir, 'https://a:6443', [...sans, '10.9.9.9'], 0)).toBeUndefined()
    // Issued by another cluster (the state dir used with another kubeconfig): asked of this one.
    expect(await keptClusterCert(stateDir, 'https://b:6443', sans, 0)).toBeUndefined()
    // Within its renewal window: asked for again.
    expect(await keptClusterCert(stateDir, 'https://a:6443', sans, 400 * 24 * 3600_000)).toBeUndefined()
  })

  test("requestServingCert: an approval the user's RBAC forbids and no other approver: one line naming kubectl certificate approve, then not approved within the wait", async () => {
    const stateDir = freshDir()
    const {api, calls} = fakeApi({approve: false})
    const lines: string[] = []
    const r = await requestServingCert({api, cluster: 'https://a:6443', stateDir, nodeName: 'n1', sans, waitMs: 100, pollIntervalMs: 20, log: (l) => lines.push(l)})
    expect(r).toEqual({
      ok: false,
      why: expect.stringMatching(/^CSR vnode-serving-abc not approved: vnode's user cannot approve it \(forbidden: signers.* is forbidden\) within 0 s \(signer kubernetes.io\/kubelet-serving\)$/),
    })
    expect(lines).toEqual([expect.stringContaining('`kubectl certificate approve vnode-serving-abc` approves it')])
    expect(calls.at(-1)).toBe('delete vnode-serving-abc')
    expect(existsSync(join(stateDir, 'pki', `${ClusterServingCertName}.crt`))).toBe(false)
    expect(existsSync(join(stateDir, 'pki', `${ClusterServingCertName}-pending.key`))).toBe(false)
  })

  test('requestServingCert: a cluster without the API (or without the right to create) is said at once', async () => {
    const api = {
      createCertificateSigningRequest: async () => {
        throw Object.assign(new Error('HTTP 404'), {code: 404, body: 'the server could not find the requested resource'})
      },
    } as unknown as CsrApi
    const r = await requestServingCert({api, cluster: 'https://a:6443', stateDir: freshDir(), nodeName: 'n1', sans, waitMs: 5000})
    expect(r).toEqual({ok: false, why: 'cannot create a CertificateSigningRequest (HTTP 404)'})
  })

  describe('the kubelet server', () => {
    const servers: KubeletServer[] = []
    afterAll(async () => {
      for (const s of servers) await s.stop()
    })
    const server = (stateDir: string, servingCert: ServingCertSource) => {
      const s = new KubeletServer({
        nodeName: 'n1',
        port: 0,
        host: '127.0.0.1',
        stateDir,
        sans: ['n1', '127.0.0.1'],
        sources: {pods: () => []},
        anonymousAuth: false,
        authorizationMode: 'AlwaysAllow',
        reviewer: {tokenReview: async () => ({authenticated: false}), subjectAccessReview: async () => false} as never,
        servingCert,
      })
      servers.push(s)
      return s
    }
    /** The issuer of the certificate the server hands a new connection. */
    const issuer = (port: number) =>
      new Promise<string>((resolve, reject) => {
        const c = connect({host: '127.0.0.1', port, rejectUnauthorized: false}, () => {
          resolve(String(c.getPeerCertificate().issuer.CN))
          c.destroy()
        })
        c.on('error', reject)
      })

    test('auto: serves the self-signed certificate at once, then the cluster-signed one once issued; a new address asks again before it is served', async () => {
      const stateDir = freshDir()
      const {api, calls} = fakeApi({approve: true, issueOnRead: 1})
      const lines: string[] = []
      const s = server(stateDir, {mode: 'auto', api, cluster: 'https://a:6443', log: (l) => lines.push(l)})
      await s.start()
      expect(s.cert?.signedBy).toBe('self')
      expect((await s.servingSettled())?.signedBy).toBe('cluster')
      expect(await issuer(s.port)).toBe('test-cluster-ca')
      expect(lines).toEqual([expect.stringMatching(/^serving certificate: issued by the cluster \(CSR vnode-serving-abc, signer kubernetes.io\/kubelet-serving\) for n1, 127.0.0.1$/)])
      await s.addSans(['10.9.9.9'])
      expect(calls.filter((c) => c === 'create')).toHaveLength(2)
      expect(new X509Certificate(s.cert!.cert).checkIP('10.9.9.9')).toBe('10.9.9.9')
      expect(s.cert?.signedBy).toBe('cluster')
    })

    test("auto: what is served is reported each time it is settled, with the self-signed one's reason (the Node's annotation)", async () => {
      const issued: string[] = []
      const a = server(freshDir(), {mode: 'auto', api: fakeApi({approve: true, issueOnRead: 1}).api, cluster: 'https://a:6443', onServed: (w) => issued.push(w)})
      await a.start()
      await a.servingSettled()
      expect(issued).toEqual(["self-signed: the cluster's is asked for (a kubelet-serving CSR)", 'cluster'])
      const never: string[] = []
      const b = server(freshDir(), {mode: 'auto', api: fakeApi({approve: true}).api, cluster: 'https://a:6443', waitMs: 300, onServed: (w) => never.push(w)})
      await b.start()
      await b.servingSettled()
      expect(b.cert?.signedBy).toBe('self')
      expect(never).toEqual(["self-signed: the cluster's is asked for (a kubelet-serving CSR)", expect.stringMatching(/^self-signed: CSR vnode-serving-abc approved but not issued within 0 s/)])
    })

    test('auto: a certificate kept from an earlier run is served at start without asking', async () => {
      const stateDir = freshDir()
      const first = fakeApi({approve: true, issueOnRead: 1})
      const a = server(stateDir, {mode: 'auto', api: first.api, cluster: 'https://a:6443'})
      await a.start()
      await a.servingSettled()
      await a.stop()
      const again = fakeApi({approve: true, issueOnRead: 1})
      const b = server(stateDir, {mode: 'auto', api: again.api, cluster: 'https://a:6443'})
      await b.start()
      expect(b.cert?.signedBy).toBe('cluster')
      expect(again.calls).toEqual([])
    })

    test('csr: a cluster that does not issue it fails the start, naming auto', async () => {
      const api = {
        createCertificateSigningRequest: async () => {
          throw Object.assign(new Error('HTTP 403'), {code: 403, body: JSON.stringify({message: 'certificatesigningrequests is forbidden'})})
        },
      } as unknown as CsrApi
      const s = server(freshDir(), {mode: 'csr', api, cluster: 'https://a:6443'})
      await expect(s.start()).rejects.toThrow(
        'serving certificate: cannot create a CertificateSigningRequest (forbidden: certificatesigningrequests is forbidden) (--serving-cert auto would serve a self-signed one instead)',
      )
    })
  })
})
