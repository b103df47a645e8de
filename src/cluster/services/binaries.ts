import {join} from 'node:path'
import {buildCacheDir, isExecutable} from '../binaries.js'
import {cacheRoot} from '../paths.js'
import {CoreDnsVersion, MetricsServerVersion, ServiceBinaries, type ServiceBinary} from './versions.js'

/** Where each service binary is cached: kube-proxy beside the control plane it was built with. */
export function serviceBinaryPath(name: ServiceBinary, env: NodeJS.ProcessEnv = process.env): string {
  switch (name) {
    case 'kube-proxy':
      return join(buildCacheDir(env), 'kube-proxy')
    case 'metrics-server':
      return join(cacheRoot(env), 'services', `metrics-server-${MetricsServerVersion}`, 'metrics-server')
    case 'coredns':
      return join(cacheRoot(env), 'services', `coredns-${CoreDnsVersion}`, 'coredns')
  }
}

/** The service binaries that are not in the cache yet. */
export function missingServiceBinaries(env: NodeJS.ProcessEnv = process.env): ServiceBinary[] {
  return ServiceBinaries.filter((b) => !isExecutable(serviceBinaryPath(b, env)))
}
