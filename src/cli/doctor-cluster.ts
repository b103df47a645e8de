import {dirname} from 'node:path'
import {routeDevice, ServiceRouteInterface} from '../common/service-route.js'
import {defaultClusterDir} from '../cluster/paths.js'
import {UserError} from '../errors.js'
import type {ClusterFacts} from './doctor.js'
import {isNotFound} from '../emulator/kube/errors.js'
import type {V1Node} from '@kubernetes/client-node'
import type {NodeEndpointFacts, RelayFacts} from './doctor-endpoint.js'
import type {KubeFlagValues} from './flags.js'

/** The runtime's rules about an API server, from the caller (services do not import the runtime). */
export interface ClusterRules {
  isLoopback: (server: string) => boolean
  /** Why `--pod-network auto` stays off with this server, or undefined. */
  podNetworkAutoOff: (server: string) => string | undefined
}

/** What doctor asks about the kubelet endpoints: up's --relay-namespace, and the nodes to check (none named: every Ready vnode node). */
export interface EndpointQuery {
  relayNamespace: string
  nodes: string[]
}

/**
 * What doctor asks the cluster of the current kubeconfig context, as kubectl
 * would: its version, the kube-dns Service (and whether this host routes its
 * ClusterIP), the metrics API. A cluster that cannot be reached, or a
 * kubeconfig that is not there, is a fact, not an error; a --context or
 * --kubeconfig given that does not exist is the user's error.
 */
export async function clusterFacts(flags: KubeFlagValues, rules: ClusterRules, endpoints: EndpointQuery): Promise<ClusterFacts> {
  const {openSession, kubectlErrorText} = await import('./session.js')
  let session: Awaited<ReturnType<typeof openSession>>
  try {
    session = await openSession(flags)
  } catch (error) {
    if (error instanceof UserError && !(flags.context || flags.kubeconfig)) return {reachable: false, loopback: false, error: error.message, metrics: {available: false, why: ''}}
    throw error
  }
  const server = session.server
  const base = {server, context: session.kc.getCurrentContext() || undefined, loopback: rules.isLoopback(server), podNetworkAutoOff: rules.podNetworkAutoOff(server)}
  let version: string
  try {
    version = (await new session.lib.VersionApi(session.config).getCode()).gitVersion
  } catch (error) {
    return {...base, reachable: false, error: kubectlErrorText(error, session), metrics: {available: false, why: ''}}
  }
  const svc = await session.core.readNamespacedService({name: 'kube-dns', namespace: 'kube-system'}).catch(() => undefined)
  const ip = svc?.spec?.clusterIP
  const dns = ip && ip !== 'None' ? {ip, routedHere: (await routeDevice(ip)) === ServiceRouteInterface} : undefined
  const metrics = await new session.lib.ApiregistrationV1Api(session.config).readAPIService({name: 'v1beta1.metrics.k8s.io'}).then(
    (a) => {
      const available = a.status?.conditions?.find((c) => c.type === 'Available')
      return available?.status === 'True'
        ? {available: true, why: `the metrics API is served (${a.spec?.service ? `${a.spec.service.namespace}/${a.spec.service.name}` : 'local'}): kubectl top reads the node's /metrics/resource`}
        : {available: false, why: `the metrics API is registered but not available: ${available?.message ?? available?.reason ?? 'no Available condition'}`}
    },
    (error: unknown) => ({
      available: false,
      why: isNotFound(error) ? 'no metrics API (v1beta1.metrics.k8s.io): metrics-server is not installed' : kubectlErrorText(error, session),
    }),
  )
  const [relay, nodes] = await Promise.all([relayFacts(session, endpoints.relayNamespace), nodeEndpoints(session, endpoints.nodes)])
  return {...base, reachable: true, version, dns, metrics, localServices: base.loopback ? await localServices(server, flags) : undefined, relay, nodes}
}

const isReady = (n: V1Node) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true

type Session = Awaited<ReturnType<(typeof import('./session.js'))['openSession']>>

/** What a relay pod needs from this user in its namespace (node-relay.ts's calls). */
const RelayNeeds = [
  {verb: 'create', resource: 'pods'},
  {verb: 'delete', resource: 'pods'},
  {verb: 'watch', resource: 'pods'},
  {verb: 'create', resource: 'configmaps'},
  {verb: 'create', resource: 'pods', subresource: 'portforward'},
] as const

/** This user's rights for a relay (SelfSubjectAccessReviews), and the nodes a relay pod could be scheduled to. */
async function relayFacts(session: Session, namespace: string): Promise<RelayFacts> {
  const authz = new session.lib.AuthorizationV1Api(session.config)
  // One review per need, asked together.
  const allowed = await Promise.all(
    RelayNeeds.map((need) =>
      authz
        .createSelfSubjectAccessReview({body: {spec: {resourceAttributes: {namespace, ...need}}}})
        .then((r) => r.status?.allowed === true)
        .catch(() => false),
    ),
  )
  const denied = RelayNeeds.filter((_, i) => !allowed[i]).map((need) => `${need.verb} ${need.resource}${'subresource' in need ? `/${need.subresource}` : ''}`)
  const nodes = await session.core.listNode().catch(() => undefined)
  const schedulable = nodes?.items.filter((n) => !n.spec?.unschedulable && isReady(n) && !(n.spec?.taints ?? []).some((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute')).length
  return {namespace, denied, schedulable}
}

/** The nodes named, else every Ready vnode node: each one's published endpoint, and whether the API server reaches it. */
async function nodeEndpoints(session: Session, names: string[]): Promise<NodeEndpointFacts[]> {
  const {NodeMarkerLabel, RelayAnnotation, ServingCertAnnotation} = await import('../common/labels.js')
  const {checkNodeReachable} = await import('../emulator/relay/reach.js')
  const nodes = names.length
    ? await Promise.all(
        names.map((name) =>
          session.core.readNode({name}).catch((error: unknown): V1Node => {
            if (isNotFound(error)) throw new UserError(`nodes "${name}" not found`)
            // This user may not read the Node: the reach check still says what the API server answers.
            return {metadata: {name}}
          }),
        ),
      )
    : ((await session.core.listNode({labelSelector: `${NodeMarkerLabel}=true`}).catch(() => undefined))?.items ?? []).filter(isReady)
  return Promise.all(
    nodes.map(async (n): Promise<NodeEndpointFacts> => {
      const name = n.metadata?.name ?? ''
      const addresses = n.status?.addresses ?? []
      const address = addresses.find((a) => a.type === 'InternalIP')?.address
      const hostname = addresses.find((a) => a.type === 'Hostname' && a.address !== address)?.address
      const port = n.status?.daemonEndpoints?.kubeletEndpoint?.Port
      const reach = await checkNodeReachable(session.kc, name)
      return {name, relay: n.metadata?.annotations?.[RelayAnnotation], address, port, hostname, reach, servingCert: n.metadata?.annotations?.[ServingCertAnnotation]}
    }),
  )
}

/**
 * For the local control plane of `cluster up` serving at server (found beside
 * the kubeconfig, or in the default cluster dir): whether its own kube-proxy
 * runs, and why not. Without it the cluster's ClusterIPs go to its own
 * device, where nothing answers.
 */
async function localServices(server: string, flags: KubeFlagValues): Promise<ClusterFacts['localServices']> {
  const {readState} = await import('../cluster/controlplane.js')
  const {isAlive} = await import('../cluster/process.js')
  const {homedir} = await import('node:os')
  const kubeconfigs = flags.kubeconfig ? [flags.kubeconfig] : (process.env.KUBECONFIG ?? '').split(':').filter(Boolean)
  const dirs = [...(kubeconfigs.length ? kubeconfigs : [`${homedir()}/.kube/config`]).map((k) => dirname(k)), defaultClusterDir()]
  for (const dir of dirs) {
    const state = await readState(dir)
    if (state?.server !== server) continue
    const pid = state.services?.pids['kube-proxy']
    return {kubeProxy: pid !== undefined && isAlive(pid), skipped: state.services?.skipped.find((l) => l.startsWith('kube-proxy'))}
  }
  return undefined
}
