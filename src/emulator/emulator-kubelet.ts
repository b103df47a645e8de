import type {V1Pod} from '@kubernetes/client-node'
import {hostname} from 'node:os'
import type {EmulatorOptions} from './emulator-config.js'
import type {KubeClients} from './kube/client.js'
import type {NodeSpecConfig} from './node/node-status.js'
import type {PodLifecycleHandler} from './provider/handler.js'
import type {ContainerLogs} from './provider/logs.js'
import {isContainerStreaming} from './provider/streaming.js'
import {loadClientCa} from './server/client-ca.js'
import {apiReviewer} from './server/review-api.js'
import {KubeletServer} from './server/server.js'
import {defaultRunningCheck, type KubeletSources} from './server/sources.js'
import {isDnsSubdomain} from './server/validate.js'

/** What the kubelet API of one emulated node is wired to; the provider is looked up per request (it starts after the server). */
export interface KubeletWiring {
  opts: EmulatorOptions
  clients: KubeClients
  stateDir: string
  config: NodeSpecConfig
  provider: () => PodLifecycleHandler | undefined
  pods: () => V1Pod[]
  logs: ContainerLogs
  /** Where the serving certificate's lines go. */
  log: (line: string) => void
  /** Which serving certificate is served (`cluster` or `self-signed: <why>`), for the Node's annotation. */
  servedCert?: (what: string) => void
}

/**
 * What the kubelet API serves: the pod core's pods and the provider's usage.
 * With a provider that measures usage, a pod runs while it has a live
 * process; otherwise its status says. Options override each source (tests).
 */
function kubeletSources(w: KubeletWiring): KubeletSources {
  const given = w.opts.kubelet ?? {}
  const providerUsage = () => w.provider()?.usage?.() ?? []
  const usage = given.usage ?? providerUsage
  const isRunning = given.isRunning ?? (given.usage ? defaultRunningCheck(given.usage) : (pod: V1Pod) => defaultRunningCheck(w.provider()?.usage ? providerUsage : undefined)(pod))
  return {pods: given.pods ?? w.pods, usage, isRunning, logs: w.logs, pool: given.pool ?? (() => w.provider()?.pool?.()), heapTrims: given.heapTrims ?? (() => w.provider()?.heapTrims?.())}
}

/** The kubelet HTTPS API on the port the node advertises, started. */
export async function startKubeletServer(w: KubeletWiring): Promise<KubeletServer> {
  const o = w.opts
  const host = hostname().toLowerCase()
  const server = new KubeletServer({
    nodeName: o.name,
    port: w.config.port,
    // Behind a relay only the tunnels, from this process, reach the kubelet API.
    host: o.relay?.mode === 'on' ? '127.0.0.1' : undefined,
    stateDir: w.stateDir,
    sans: [o.name, ...(isDnsSubdomain(host) ? [host] : []), w.config.nodeIP, 'localhost', '127.0.0.1'],
    sources: kubeletSources(w),
    anonymousAuth: o.anonymousAuth ?? false,
    authorizationMode: o.authorizationMode ?? 'Webhook',
    clientCa: await loadClientCa(w.clients.kc, o.clientCaFile),
    reviewer: apiReviewer(w.clients.authentication, w.clients.authorization),
    servingCert: {mode: o.servingCert ?? 'auto', api: w.clients.certificates, cluster: w.clients.server, waitMs: o.servingCertWaitMs, log: w.log, onServed: w.servedCert},
    // exec and attach, when the runtime offers them.
    streaming: () => {
      const p = w.provider()
      return isContainerStreaming(p) ? p : undefined
    },
  })
  await server.start()
  return server
}
