import {randomBytes} from 'node:crypto'
import {chmod, mkdir, readFile, rm, stat} from 'node:fs/promises'
import {isIP} from 'node:net'
import {join} from 'node:path'

/**
 * Certificates through the openssl CLI (argv, never a shell): a kept tool
 * instead of hand-written ASN.1. Keys are 0600 in a 0700 directory.
 */

export interface CertPair {
  cert: string
  key: string
}

export interface CertRequest {
  /** File stem inside dir: <name>.crt and <name>.key */
  name: string
  commonName: string
  organizations?: string[]
  /** DNS names and IP addresses. */
  sans?: string[]
  usage: 'server' | 'client' | 'both'
  days?: number
}

export const DefaultCertDays = 365
export const DefaultCaDays = 3650

async function openssl(args: string[]): Promise<void> {
  const {execa} = await import('execa')
  await execa('openssl', args, {stdin: 'ignore'})
}

async function fileExists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}

export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, {recursive: true, mode: 0o700})
  await chmod(dir, 0o700)
}

function subject(commonName: string, organizations: string[] = []): string {
  const esc = (s: string) => s.replace(/[/\\=+,]/g, (c) => `\\${c}`)
  return organizations.map((o) => `/O=${esc(o)}`).join('') + `/CN=${esc(commonName)}`
}

/** The subjectAltName extension value for names and addresses. */
export function subjectAltName(sans: string[]): string {
  return sans.map((s) => (isIP(s) ? `IP:${s}` : `DNS:${s}`)).join(',')
}

export async function createCa(dir: string, commonName: string): Promise<CertPair> {
  await ensurePrivateDir(dir)
  const pair = {cert: join(dir, 'ca.crt'), key: join(dir, 'ca.key')}
  if ((await fileExists(pair.cert)) && (await fileExists(pair.key))) return pair
  await openssl([
    'req',
    '-x509',
    '-new',
    '-nodes',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-keyout',
    pair.key,
    '-out',
    pair.cert,
    '-days',
    String(DefaultCaDays),
    '-subj',
    subject(commonName),
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ])
  await chmod(pair.key, 0o600)
  return pair
}

/** Issues a certificate signed by ca, unless one already exists under that name. */
export async function issueCert(dir: string, ca: CertPair, req: CertRequest): Promise<CertPair> {
  await ensurePrivateDir(dir)
  const pair = {cert: join(dir, `${req.name}.crt`), key: join(dir, `${req.name}.key`)}
  if ((await fileExists(pair.cert)) && (await fileExists(pair.key))) return pair
  const csr = join(dir, `${req.name}.csr`)
  const eku = {server: 'serverAuth', client: 'clientAuth', both: 'serverAuth,clientAuth'}[req.usage]
  const ext = ['-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'keyUsage=critical,digitalSignature,keyEncipherment', '-addext', `extendedKeyUsage=${eku}`]
  if (req.sans && req.sans.length > 0) ext.push('-addext', `subjectAltName=${subjectAltName(req.sans)}`)
  try {
    await openssl(['req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-keyout', pair.key, '-out', csr, '-subj', subject(req.commonName, req.organizations), ...ext])
    await chmod(pair.key, 0o600)
    await openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-days',
      String(req.days ?? DefaultCertDays),
      '-copy_extensions',
      'copyall',
      '-out',
      pair.cert,
    ])
  } finally {
    await rm(csr, {force: true})
  }
  return pair
}

/**
 * A new EC key (dir/<name>.key, 0600) and a PKCS#10 request for it, PEM, for
 * a certificate someone else signs (a CertificateSigningRequest): subject and
 * subjectAltName only, since the signer decides the usages.
 */
export async function createKeyAndRequest(dir: string, name: string, commonName: string, organizations: string[], sans: string[]): Promise<{key: string; request: string}> {
  await ensurePrivateDir(dir)
  const key = join(dir, `${name}.key`)
  const csr = join(dir, `${name}.csr`)
  const ext = sans.length > 0 ? ['-addext', `subjectAltName=${subjectAltName(sans)}`] : []
  try {
    await rm(key, {force: true})
    await openssl(['req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-keyout', key, '-out', csr, '-subj', subject(commonName, organizations), ...ext])
    await chmod(key, 0o600)
    return {key, request: await readFile(csr, 'utf8')}
  } finally {
    await rm(csr, {force: true})
  }
}

/** An RSA key pair for signing service-account tokens. */
export async function createServiceAccountKeys(dir: string): Promise<{key: string; pub: string}> {
  await ensurePrivateDir(dir)
  const out = {key: join(dir, 'sa.key'), pub: join(dir, 'sa.pub')}
  if ((await fileExists(out.key)) && (await fileExists(out.pub))) return out
  await openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', out.key])
  await chmod(out.key, 0o600)
  await openssl(['pkey', '-in', out.key, '-pubout', '-out', out.pub])
  return out
}
