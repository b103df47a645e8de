import {type V1Node, type V1OwnerReference} from '@kubernetes/client-node'
import {UserError} from '../../errors.js'
import type {KubeClients} from '../kube/client.js'
import type {NodeController} from '../node/node-controller.js'
import type {KubeletServer} from '../server/server.js'
import {NodeRelay} from './node-relay.js'
import {RelayAnnotation} from '../../common/labels.js'
import {checkNodeReachable} from './reach.js'
import {DefaultRelayImage, DefaultRelayNamespace, DefaultRelayPort, DefaultRelayTunnelPort} from './relay-pod.js'

/**
 * Where the API server reaches this node's kubelet API (`up --relay`):
 * direct, at the node's own address, or through a relay pod in the cluster.
 * auto asks the API server to reach the node once it is registered, and
 * keeps direct when it does.
 */

export type RelayMode = 'auto' | 'on' | 'off'

export interface RelayOptions {
  mode: RelayMode
  namespace?: string
  image?: string
  /** The relay's public port (the node's kubelet port as published). */
  port?: number
  tunnelPort?: number
  /** Where the relay pod may run. */
  nodeSelector?: Record<string, string>
  idleTunnels?: number
  readyTimeoutMs?: number
}

export interface EndpointParts {
  clients: KubeClients
  nodeName: string
  nodeIP: string
  kubeletPort: number
  nodeController: NodeController
  /** The Node as registered (a relay annotation from an earlier run is removed when direct). */
  registered: V1Node
  kubeletServer: KubeletServer
  log: (line: string) => void
}

/** Decides, says which and why in one line, and starts the relay when it is chosen; undefined when direct. */
export async function startKubeletEndpoint(o: RelayOptions, p: EndpointParts): Promise<NodeRelay | undefined> {
  const here = `${p.nodeIP}:${p.kubeletPort}`
  const direct = async (line: string) => {
    p.log(`kubelet endpoint: direct at ${here}${line}`)
    if (p.registered.metadata?.annotations?.[RelayAnnotation]) await annotate(p, null)
    return undefined
  }
  if (o.mode === 'off') return direct(' (--relay off)')
  if (o.mode === 'auto') {
    let reach = await checkNodeReachable(p.clients.kc, p.nodeName)
    // The API server refused the self-signed certificate served while the cluster's was asked for: ask again once it is settled.
    if (reach.untrusted && (await p.kubeletServer.servingSettled())?.signedBy === 'cluster') reach = await checkNodeReachable(p.clients.kc, p.nodeName)
    if (reach.reachable) return direct(`: the API server reaches it (${reach.why})`)
    if (reach.unknown) return direct(`: cannot tell whether the API server reaches it (${reach.why}); --relay on uses a relay`)
    if (reach.untrusted)
      return direct(
        `: the API server reaches it but refuses its serving certificate (${reach.why}); a relay carries the same TLS, so it stays direct: --serving-cert auto or csr where the cluster issues kubelet-serving certificates, else kubectl logs --insecure-skip-tls-verify-backend`,
      )
    p.log(`kubelet endpoint: relay: the API server cannot reach ${here} (${reach.why})`)
  } else p.log('kubelet endpoint: relay (--relay on)')
  const port = o.port ?? DefaultRelayPort
  const relay: NodeRelay = new NodeRelay(
    {node: p.nodeName, namespace: o.namespace ?? DefaultRelayNamespace, image: o.image ?? DefaultRelayImage, port, tunnelPort: o.tunnelPort ?? DefaultRelayTunnelPort, nodeSelector: o.nodeSelector},
    {
      kc: p.clients.kc,
      core: p.clients.core,
      counter: p.clients.counter,
      owner: () => nodeOwner(p),
      local: {host: '127.0.0.1', port: p.kubeletPort},
      log: p.log,
      onEndpoint: (ip): Promise<void> => publish(p, relay, ip, port),
    },
    {idleTunnels: o.idleTunnels, readyTimeoutMs: o.readyTimeoutMs},
  )
  p.log(`relay: starting pod ${relay.ref} (image ${relay.spec.image}, port ${port})`)
  try {
    const ip = await relay.start()
    await publish(p, relay, ip, port)
  } catch (error) {
    await relay.stop().catch(() => undefined)
    const why = `relay: cannot start ${relay.ref}: ${(error as Error).message}`
    if (o.mode === 'on') throw new UserError(why)
    return direct(`: ${why}; kubectl logs, exec and port-forward will not reach this node`)
  }
  return relay
}

/** The node published at the relay: its IP as InternalIP (no Hostname), its port, in the serving certificate. */
async function publish(p: EndpointParts, relay: NodeRelay, ip: string, port: number): Promise<void> {
  await p.kubeletServer.addSans([ip])
  p.nodeController.setEndpoint({nodeIP: ip, port})
  await annotate(p, relay.ref)
  await p.nodeController.syncStatus(true)
  p.log(`kubelet endpoint: ${ip}:${port} through the relay ${relay.ref}`)
}

function nodeOwner(p: EndpointParts): V1OwnerReference | undefined {
  const uid = p.nodeController.uid
  return uid ? {apiVersion: 'v1', kind: 'Node', name: p.nodeName, uid} : undefined
}

/** The node's relay annotation (null removes it), also in what a registration writes. */
async function annotate(p: EndpointParts, value: string | null): Promise<void> {
  await p.nodeController.setAnnotation(RelayAnnotation, value).catch((e: Error) => p.log(`relay: cannot annotate node ${p.nodeName}: ${e.message}`))
}
