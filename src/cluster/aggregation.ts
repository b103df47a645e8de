import {join} from 'node:path'
import {type CertPair, createCa, issueCert} from '../common/pki.js'

/**
 * The aggregation layer: the API server proxies /apis/metrics.k8s.io (and
 * any APIService) to an extension API server, naming the user in request
 * headers it signs with the front-proxy client certificate. The front proxy
 * has a CA of its own, as kubeadm sets it up, so a client certificate of the
 * cluster CA cannot pose as the front proxy.
 */

export const FrontProxyClientName = 'front-proxy-client'

export interface FrontProxyPki {
  ca: CertPair
  client: CertPair
}

export async function createFrontProxyPki(pkiDir: string): Promise<FrontProxyPki> {
  const dir = join(pkiDir, 'front-proxy')
  const ca = await createCa(dir, 'vnode-front-proxy-ca')
  const client = await issueCert(dir, ca, {name: 'client', commonName: FrontProxyClientName, usage: 'client'})
  return {ca, client}
}

/** kube-apiserver flags that turn the aggregation layer on. */
export function aggregationArgs(fp: FrontProxyPki): string[] {
  return [
    `--requestheader-client-ca-file=${fp.ca.cert}`,
    `--requestheader-allowed-names=${FrontProxyClientName}`,
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${fp.client.cert}`,
    `--proxy-client-key-file=${fp.client.key}`,
    // Nothing may route a Service IP on this host (kube-proxy is optional and
    // needs root): the API server dials the extension server's endpoint itself.
    '--enable-aggregator-routing=true',
  ]
}
