import {X509Certificate} from 'node:crypto'
import {readFile, rm} from 'node:fs/promises'
import {isIP} from 'node:net'
import {join} from 'node:path'
import {type CertPair, createCa, issueCert} from '../../common/pki.js'

/**
 * The kubelet's self-signed serving certificate, made the vnode way: a CA
 * local to the node and a certificate for system:node:<name> with the node's
 * names and addresses, in <stateDir>/pki (keys 0600, directory 0700). Kept
 * across restarts; issued again when it no longer covers the node's names or
 * is close to expiry.
 */

export const ServingCertName = 'kubelet-serving'
/** Renew when less than this is left, as the kubelet's certificate manager rotates before expiry. */
export const DefaultServingRenewBeforeMs = 30 * 24 * 3600_000

export interface ServingCert {
  pair: CertPair
  cert: Buffer
  key: Buffer
  /** The vnode-local CA that signed it (clients may pin it). */
  caCert: string
}

export function coversAll(cert: X509Certificate, sans: string[]): boolean {
  return sans.every((s) => (isIP(s) ? cert.checkIP(s) !== undefined : cert.checkHost(s, {subject: 'never'}) !== undefined))
}

async function usable(pair: CertPair, sans: string[], renewBeforeMs: number): Promise<boolean> {
  try {
    const cert = new X509Certificate(await readFile(pair.cert))
    return coversAll(cert, sans) && Date.parse(cert.validTo) - Date.now() > renewBeforeMs
  } catch {
    return false
  }
}

export async function ensureServingCert(stateDir: string, nodeName: string, sans: string[], renewBeforeMs = DefaultServingRenewBeforeMs): Promise<ServingCert> {
  const dir = join(stateDir, 'pki')
  const ca = await createCa(dir, `vnode-${nodeName}-ca`)
  const names = [...new Set(sans.filter((s) => s !== ''))]
  const existing = {cert: join(dir, `${ServingCertName}.crt`), key: join(dir, `${ServingCertName}.key`)}
  if (!(await usable(existing, names, renewBeforeMs))) {
    await rm(existing.cert, {force: true})
    await rm(existing.key, {force: true})
  }
  const pair = await issueCert(dir, ca, {
    name: ServingCertName,
    commonName: `system:node:${nodeName}`,
    organizations: ['system:nodes'],
    sans: names,
    usage: 'server',
  })
  return {pair, cert: await readFile(pair.cert), key: await readFile(pair.key), caCert: ca.cert}
}
