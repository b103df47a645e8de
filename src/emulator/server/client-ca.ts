import type {KubeConfig} from '@kubernetes/client-node'
import {readFile} from 'node:fs/promises'
import {UserError} from '../../errors.js'

/**
 * The CA client certificates are verified against: --client-ca-file, else
 * the cluster CA of the kubeconfig (which signs the API server's
 * kubelet-client certificate in kubeadm-style clusters). Undefined when
 * neither exists (x509 authentication is then off; tokens still work).
 */
export async function loadClientCa(kc: KubeConfig, clientCaFile?: string): Promise<Buffer | undefined> {
  if (clientCaFile) {
    let pem: Buffer
    try {
      pem = await readFile(clientCaFile)
    } catch (error) {
      throw new UserError(`cannot read --client-ca-file ${clientCaFile}: ${(error as Error).message}`)
    }
    if (!pem.toString('utf8').includes('-----BEGIN CERTIFICATE-----')) throw new UserError(`--client-ca-file ${clientCaFile} holds no PEM certificate`)
    return pem
  }
  const cluster = kc.getCurrentCluster()
  if (cluster?.caData) return Buffer.from(cluster.caData, 'base64')
  if (cluster?.caFile) return readFile(cluster.caFile).catch(() => undefined)
  return undefined
}
