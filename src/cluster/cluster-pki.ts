import {X509Certificate} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'
import {type CertPair, createCa, createServiceAccountKeys, issueCert} from '../common/pki.js'
import {createFrontProxyPki, type FrontProxyPki} from './aggregation.js'
import {hostAddresses} from './host.js'

/** The local control plane's certificates, and the kubeconfigs that embed them. */

export const ContextName = 'vnode'
/** The common name of the local control plane's CA: how `up` knows a cluster of `cluster up` (cli/allowed-namespaces.ts). */
export const LocalClusterCaName = 'vnode-cluster-ca'

function b64(path: string): string {
  return readFileSync(path).toString('base64')
}

/** A kubeconfig with everything embedded, so it can be copied elsewhere. */
export function kubeconfigYaml(server: string, ca: string, user: CertPair, userName: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${ContextName}`,
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${b64(ca)}`,
    'users:',
    `- name: ${userName}`,
    '  user:',
    `    client-certificate-data: ${b64(user.cert)}`,
    `    client-key-data: ${b64(user.key)}`,
    'contexts:',
    `- name: ${ContextName}`,
    '  context:',
    `    cluster: ${ContextName}`,
    `    user: ${userName}`,
    `current-context: ${ContextName}`,
    '',
  ].join('\n')
}

export interface Pki {
  ca: CertPair
  apiserver: CertPair
  admin: CertPair
  kubeletClient: CertPair
  controllerManager: CertPair
  scheduler: CertPair
  sa: {key: string; pub: string}
  frontProxy: FrontProxyPki
}

/** The cluster's CA, made once per dir: what names the cluster (service-route.ts's caFingerprint). */
export function createClusterCa(dir: string): Promise<CertPair> {
  return createCa(join(dir, 'pki'), LocalClusterCaName)
}

/** Whether the certificate at path names every address of ips. */
function coversAll(path: string, ips: string[]): boolean {
  try {
    const names = new X509Certificate(readFileSync(path)).subjectAltName ?? ''
    return ips.every((ip) => names.split(', ').includes(`IP Address:${ip}`))
  } catch {
    return true
  }
}

/**
 * The control plane's certificates; the API server's names addresses (the
 * API server's own, the `kubernetes` Service's ClusterIP): issued again
 * when the one kept in dir does not name them all.
 */
export async function createPki(dir: string, addresses: string[]): Promise<Pki> {
  const pki = join(dir, 'pki')
  const ca = await createClusterCa(dir)
  const sans = ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', '127.0.0.1', ...addresses, ...hostAddresses()]
  if (!coversAll(join(pki, 'apiserver.crt'), addresses)) await rm(join(pki, 'apiserver.crt'), {force: true})
  return {
    ca,
    apiserver: await issueCert(pki, ca, {name: 'apiserver', commonName: 'kube-apiserver', sans, usage: 'server'}),
    admin: await issueCert(pki, ca, {name: 'admin', commonName: 'kubernetes-admin', organizations: ['system:masters'], usage: 'client'}),
    kubeletClient: await issueCert(pki, ca, {
      name: 'apiserver-kubelet-client',
      commonName: 'kube-apiserver-kubelet-client',
      organizations: ['system:masters'],
      usage: 'client',
    }),
    controllerManager: await issueCert(pki, ca, {name: 'controller-manager', commonName: 'system:kube-controller-manager', usage: 'client'}),
    scheduler: await issueCert(pki, ca, {name: 'scheduler', commonName: 'system:kube-scheduler', usage: 'client'}),
    sa: await createServiceAccountKeys(pki),
    frontProxy: await createFrontProxyPki(pki),
  }
}
