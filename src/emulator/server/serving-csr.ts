import type {CertificatesV1Api, V1CertificateSigningRequest} from '@kubernetes/client-node'
import {createPrivateKey, X509Certificate} from 'node:crypto'
import {chmod, readFile, rename, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {createKeyAndRequest, ensurePrivateDir} from '../../common/pki.js'
import {coversAll} from './serving-cert.js'

/**
 * A serving certificate the cluster signs (the kubelet's serverTLSBootstrap):
 * a certificates.k8s.io/v1 CertificateSigningRequest for signer
 * kubernetes.io/kubelet-serving with the node's names and addresses,
 * approved with the user's own rights where RBAC allows, and its issued
 * certificate kept in <stateDir>/pki. What the request is and what an answer
 * means are pure functions here; requestServingCert does the round trip.
 */

export type ServingCertMode = 'auto' | 'csr' | 'self-signed'
export const KubeletServingSigner = 'kubernetes.io/kubelet-serving'
/** The file stem of the cluster-signed certificate and its key. */
export const ClusterServingCertName = 'kubelet-serving-cluster'
/** How long `auto` asks (in the background, serving the self-signed one meanwhile) before it says it fell back. */
export const DefaultAutoCsrWaitMs = 5_000
/** How long `csr` waits (an approver may be a person running `kubectl certificate approve`). */
export const DefaultCsrWaitMs = 60_000
/** The wait between reads of a pending CSR: short at first (a cluster's signer answers within milliseconds of the approval), then this. */
export const CsrPollIntervalMs = 500
export const CsrFirstPollMs = 20
/** The annotation naming the node a CSR is for. */
export const CsrNodeAnnotation = 'vnode.dev/node'

/** The subject the kubelet-serving signer requires: system:node:<node> in system:nodes. */
export function servingSubject(nodeName: string): {commonName: string; organizations: string[]} {
  return {commonName: `system:node:${nodeName}`, organizations: ['system:nodes']}
}

/**
 * The CSR object for a PEM request. The key is EC, so the usages are digital
 * signature and server auth (key encipherment is for RSA keys).
 */
export function servingCsr(nodeName: string, requestPem: string): V1CertificateSigningRequest {
  return {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: {generateName: 'vnode-serving-', annotations: {[CsrNodeAnnotation]: nodeName}},
    spec: {request: Buffer.from(requestPem).toString('base64'), signerName: KubeletServingSigner, usages: ['digital signature', 'server auth']},
  }
}

/** The Approved condition vnode adds with its user's rights. */
export function approvedBy(csr: V1CertificateSigningRequest, nodeName: string, now = new Date()): V1CertificateSigningRequest {
  const conditions = (csr.status?.conditions ?? []).filter((c) => c.type !== 'Approved')
  const approved = {type: 'Approved', status: 'True', reason: 'VnodeNodeServingCert', message: `approved by kubectl vnode for the serving certificate of its node ${nodeName}`, lastUpdateTime: now}
  return {...csr, status: {...csr.status, conditions: [...conditions, approved]}}
}

export type CsrAnswer = {state: 'issued'; certPem: string} | {state: 'refused'; why: string} | {state: 'pending'; approved: boolean}

/**
 * What the cluster answered: an issued certificate that is for this key and
 * covers every name, a refusal (Denied, Failed, or a certificate that does
 * not fit), or nothing yet.
 */
export function csrAnswer(csr: V1CertificateSigningRequest, keyPem: string, sans: string[]): CsrAnswer {
  const conditions = csr.status?.conditions ?? []
  for (const type of ['Denied', 'Failed']) {
    const c = conditions.find((x) => x.type === type && x.status !== 'False')
    if (c) return {state: 'refused', why: `${type.toLowerCase()}${c.reason ? ` (${c.reason}${c.message ? `: ${c.message}` : ''})` : ''}`}
  }
  const issued = csr.status?.certificate
  if (!issued) return {state: 'pending', approved: conditions.some((c) => c.type === 'Approved' && c.status !== 'False')}
  const certPem = Buffer.from(issued, 'base64').toString('utf8')
  let cert: X509Certificate
  try {
    cert = new X509Certificate(certPem)
  } catch (error) {
    return {state: 'refused', why: `issued a certificate that does not parse (${(error as Error).message})`}
  }
  if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return {state: 'refused', why: 'issued a certificate for another key'}
  if (!coversAll(cert, sans)) return {state: 'refused', why: `issued a certificate that does not cover ${sans.join(', ')} (it has ${cert.subjectAltName ?? 'no names'})`}
  return {state: 'issued', certPem}
}

export type CsrApi = Pick<CertificatesV1Api, 'createCertificateSigningRequest' | 'replaceCertificateSigningRequestApproval' | 'readCertificateSigningRequest' | 'deleteCertificateSigningRequest'>

export interface CsrRequest {
  api: CsrApi
  stateDir: string
  /** The cluster asked (its API server's URL): a certificate is kept for the cluster that issued it. */
  cluster: string
  nodeName: string
  sans: string[]
  waitMs: number
  /** Said once while waiting (a CSR vnode could not approve). */
  log?: (line: string) => void
  signal?: AbortSignal
  pollIntervalMs?: number
}

export type CsrOutcome = {ok: true; cert: Buffer; key: Buffer; csrName: string; certPath: string} | {ok: false; why: string}

function apiWhy(error: unknown): string {
  const e = error as {code?: number; body?: unknown; message?: string}
  let message = e.message ?? String(error)
  if (typeof e.body === 'string') {
    try {
      message = (JSON.parse(e.body) as {message?: string}).message ?? message
    } catch {
      // the body as given
    }
  }
  return e.code === 403 ? `forbidden: ${message}` : message.split('\n')[0]
}

/**
 * Requests, approves where allowed, and waits up to waitMs for the
 * certificate; the CSR is deleted afterwards either way (best effort). The
 * certificate and its key go to <stateDir>/pki/kubelet-serving-cluster.{crt,key}.
 */
export async function requestServingCert(r: CsrRequest): Promise<CsrOutcome> {
  const dir = join(r.stateDir, 'pki')
  await ensurePrivateDir(dir)
  const {commonName, organizations} = servingSubject(r.nodeName)
  const pending = `${ClusterServingCertName}-pending`
  const {key, request} = await createKeyAndRequest(dir, pending, commonName, organizations, r.sans)
  const keyPem = await readFile(key, 'utf8')
  let name: string | undefined
  try {
    let csr: V1CertificateSigningRequest
    try {
      csr = await r.api.createCertificateSigningRequest({body: servingCsr(r.nodeName, request)})
    } catch (error) {
      return {ok: false, why: `cannot create a CertificateSigningRequest (${apiWhy(error)})`}
    }
    name = csr?.metadata?.name
    if (!name) return {ok: false, why: 'the API server answered the CertificateSigningRequest without a name'}
    let approval = ''
    try {
      csr = await r.api.replaceCertificateSigningRequestApproval({name, body: approvedBy(csr, r.nodeName)})
    } catch (error) {
      approval = `vnode's user cannot approve it (${apiWhy(error)})`
      r.log?.(`serving certificate: waiting for CSR ${name} to be approved and issued: ${approval}; \`kubectl certificate approve ${name}\` approves it`)
    }
    const deadline = Date.now() + r.waitMs
    let pause = Math.min(CsrFirstPollMs, r.pollIntervalMs ?? CsrPollIntervalMs)
    for (;;) {
      const answer = csrAnswer(csr, keyPem, r.sans)
      if (answer.state === 'refused') return {ok: false, why: `CSR ${name} ${answer.why}`}
      if (answer.state === 'issued') {
        const certPath = join(dir, `${ClusterServingCertName}.crt`)
        await writeFile(certPath, answer.certPem, {mode: 0o644})
        await writeFile(join(dir, `${ClusterServingCertName}.cluster`), `${r.cluster}\n`, {mode: 0o644})
        await rename(key, join(dir, `${ClusterServingCertName}.key`))
        await chmod(join(dir, `${ClusterServingCertName}.key`), 0o600)
        return {ok: true, cert: Buffer.from(answer.certPem), key: Buffer.from(keyPem), csrName: name, certPath}
      }
      if (Date.now() >= deadline || r.signal?.aborted) {
        const why = answer.approved ? 'approved but not issued' : approval ? `not approved: ${approval}` : 'not approved'
        return {ok: false, why: `CSR ${name} ${why} within ${Math.round(r.waitMs / 1000)} s (signer ${KubeletServingSigner})`}
      }
      await new Promise((resolve) => setTimeout(resolve, pause))
      pause = Math.min(pause * 2, r.pollIntervalMs ?? CsrPollIntervalMs)
      try {
        csr = await r.api.readCertificateSigningRequest({name})
      } catch (error) {
        return {ok: false, why: `cannot read CSR ${name} (${apiWhy(error)})`}
      }
    }
  } finally {
    await rm(key, {force: true})
    if (name) await r.api.deleteCertificateSigningRequest({name}).catch(() => undefined)
  }
}

/**
 * The cluster-signed certificate kept from an earlier run, when the same
 * cluster issued it (a state dir used against another cluster asks that one),
 * it still covers every name, and it is not close to expiry.
 */
export async function keptClusterCert(stateDir: string, cluster: string, sans: string[], renewBeforeMs: number): Promise<{cert: Buffer; key: Buffer; validTo: number} | undefined> {
  const dir = join(stateDir, 'pki')
  try {
    if ((await readFile(join(dir, `${ClusterServingCertName}.cluster`), 'utf8')).trim() !== cluster) return undefined
    const cert = await readFile(join(dir, `${ClusterServingCertName}.crt`))
    const key = await readFile(join(dir, `${ClusterServingCertName}.key`))
    const x = new X509Certificate(cert)
    const validTo = Date.parse(x.validTo)
    if (!coversAll(x, sans) || validTo - Date.now() <= renewBeforeMs || !x.checkPrivateKey(createPrivateKey(key))) return undefined
    return {cert, key, validTo}
  } catch {
    return undefined
  }
}
