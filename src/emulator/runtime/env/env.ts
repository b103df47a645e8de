import {allContainers} from '../../../common/pods.js'
import {EventReason} from '../../kube/event-reasons.js'
import type {V1Container, V1Pod, V1Service} from '@kubernetes/client-node'
import {homedir, hostname} from 'node:os'
import type {ObjectKind, ObjectLookup} from '../../kube/object-manager.js'
import type {ServiceLookup} from '../../kube/service-lister.js'
import {parseQuantity} from '../../quantity.js'
import {expand, mappingFor} from './expansion.js'
import {MissingReference, referencedData, referencedKey, type SourceRef} from './references.js'

/**
 * The PATH a container gets when neither `up`'s environment (EnvInput.path),
 * its image map entry nor its spec sets one: the container runtimes'
 * default. Nothing else of vnode's own environment (KUBECONFIG, tokens,
 * proxies) is passed on.
 */
export const DefaultContainerPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/** An event the env resolution wants recorded on the pod (virtual-kubelet reasons). */
export interface EnvEvent {
  type: 'Warning'
  reason: string
  message: string
}

export type EnvResult =
  | {ok: true; env: Record<string, string>; events: EnvEvent[]}
  /** A mandatory reference is missing: the container waits with CreateContainerConfigError and this message. */
  | {ok: false; message: string; events: EnvEvent[]}

export interface NodeFacts {
  nodeName: string
  nodeIP: string
  /** Allocatable CPU cores and memory bytes: what resourceFieldRef reports for an unset limit. */
  cpuCores: number
  memoryBytes: number
  ephemeralStorageBytes: number
  /** The API server's URL as this host reaches it: KUBERNETES_SERVICE_HOST/PORT name it (in-cluster config). */
  apiServer?: string
}

export interface EnvInput {
  pod: V1Pod
  container: V1Container
  node: NodeFacts
  /** The ConfigMaps and Secrets the pod references, from the node's watches. */
  objects: ObjectLookup
  /** The cluster's Services, from the node's list+watch. */
  services: ServiceLookup
  /** Runtime variables (VNODE_VOLUME_ROOT, ...): visible to $(VAR) expansion, overridable by the spec. */
  runtime: Record<string, string>
  /** Env from the image map: below everything the spec sets. */
  image?: Record<string, string>
  /** The default PATH: the one `up` was started with (the user's toolchain); DefaultContainerPath when unset. */
  path?: string
  /** The pod's own address on the pod network; undefined on the host network, where the pod's IP is the node's. */
  podIP?: string
}

/** A reference of this container, resolved by the one set of rules (references.ts). */
function sourceRef(kind: ObjectKind, namespace: string, name: string | undefined, optional: boolean | undefined): SourceRef {
  return {kind, namespace, name: name ?? '', optional: optional ?? false}
}

/** The base every container starts from: PATH (up's, or a minimal one) and HOME, HOSTNAME = pod name, plus the runtime's own vars. */
export function baseEnv(pod: V1Pod, runtime: Record<string, string>, path: string = DefaultContainerPath): Record<string, string> {
  return {PATH: path, HOME: homedir(), HOSTNAME: pod.spec?.hostNetwork ? hostname() : (pod.spec?.hostname ?? pod.metadata?.name ?? ''), ...runtime}
}

/**
 * The container's environment, built from scratch as the kubelet does
 * (makeEnvironmentVariables): service links first, then envFrom, then env in
 * order with $(VAR) expansion against what came before.
 */
export async function buildContainerEnv(input: EnvInput): Promise<EnvResult> {
  const {pod, container} = input
  const namespace = pod.metadata?.namespace ?? 'default'
  const events: EnvEvent[] = []
  const cache = input.objects
  try {
    const serviceEnv = await serviceEnvVars(input.services, namespace, pod.spec?.enableServiceLinks !== false, input.node.apiServer)
    const tmp = new Map<string, string>()
    for (const source of container.envFrom ?? []) await addEnvFrom(source, tmp, cache, namespace, events)
    const base = baseEnv(pod, input.runtime, input.path || DefaultContainerPath)
    const mapping = mappingFor(tmp, serviceEnv, input.runtime)
    for (const v of container.env ?? []) {
      if (v.value !== undefined && v.value !== '') {
        tmp.set(v.name, expand(v.value, mapping))
      } else if (v.valueFrom) {
        const value = await valueFrom(v.name, v.valueFrom, pod, container, input.node, cache, namespace, input.podIP)
        if (value !== undefined) tmp.set(v.name, value)
      } else {
        tmp.set(v.name, '')
      }
    }
    const env: Record<string, string> = {...base, ...input.image}
    for (const [k, v] of serviceEnv) env[k] = v
    for (const [k, v] of tmp) env[k] = v
    return {ok: true, env, events}
  } catch (error) {
    if (error instanceof MissingReference) return {ok: false, message: error.message, events}
    throw error
  }
}

async function addEnvFrom(source: NonNullable<V1Container['envFrom']>[number], tmp: Map<string, string>, cache: ObjectLookup, namespace: string, events: EnvEvent[]): Promise<void> {
  const prefix = source.prefix ?? ''
  let ref: SourceRef
  if (source.configMapRef) ref = sourceRef('ConfigMap', namespace, source.configMapRef.name, source.configMapRef.optional)
  else if (source.secretRef) ref = sourceRef('Secret', namespace, source.secretRef.name, source.secretRef.optional)
  else return
  const what = `${ref.kind === 'ConfigMap' ? 'configMap' : 'secret'} ${namespace}/${ref.name}`
  const data = await referencedData(cache, ref)
  if (!data) return
  const invalid: string[] = []
  for (const [k, v] of Object.entries(data)) {
    const name = prefix + k
    if (!isValidEnvName(name)) invalid.push(name)
    else tmp.set(name, v)
  }
  if (invalid.length > 0) {
    invalid.sort()
    events.push({
      type: 'Warning',
      reason: EventReason.InvalidEnvironmentVariableNames,
      message: `Keys [${invalid.join(', ')}] from the EnvFrom ${what} were skipped since they are considered invalid environment variable names.`,
    })
  }
}

/** Relaxed validation (Kubernetes 1.32+): any printable ASCII except '='. */
export function isValidEnvName(name: string): boolean {
  return name.length > 0 && /^[\x20-\x7e]+$/.test(name) && !name.includes('=')
}

async function valueFrom(
  varName: string,
  from: NonNullable<NonNullable<V1Container['env']>[number]['valueFrom']>,
  pod: V1Pod,
  container: V1Container,
  node: NodeFacts,
  cache: ObjectLookup,
  namespace: string,
  podIP: string | undefined,
): Promise<string | undefined> {
  const keyRef = from.configMapKeyRef
    ? sourceRef('ConfigMap', namespace, from.configMapKeyRef.name, from.configMapKeyRef.optional)
    : from.secretKeyRef
      ? sourceRef('Secret', namespace, from.secretKeyRef.name, from.secretKeyRef.optional)
      : undefined
  if (keyRef) {
    const data = await referencedData(cache, keyRef)
    if (!data) return undefined
    return referencedKey(data, keyRef, (from.configMapKeyRef ?? from.secretKeyRef)!.key, 'env')
  }
  if (from.fieldRef) {
    const value = podFieldValue(pod, from.fieldRef.fieldPath, node, podIP)
    if (value === undefined) throw new MissingReference(`unsupported fieldPath "${from.fieldRef.fieldPath}" for env var ${varName}`)
    return value
  }
  if (from.resourceFieldRef) {
    const ref = from.resourceFieldRef
    const target = ref.containerName ? findContainer(pod, ref.containerName) : container
    if (!target) throw new MissingReference(`resourceFieldRef of env var ${varName}: container "${ref.containerName}" not found`)
    const value = resourceFieldValue(target, ref.resource, ref.divisor, node)
    if (value === undefined) throw new MissingReference(`unsupported resource "${ref.resource}" for env var ${varName}`)
    return value
  }
  return ''
}

function findContainer(pod: V1Pod, name: string): V1Container | undefined {
  return allContainers(pod).find((c) => c.name === name)
}

/**
 * The downward API's value of a field (the kubelet's podFieldSelectorRuntimeValue):
 * status.podIP(s) are the pod's own address on the pod network, the node's
 * for a pod on the host network (podIP undefined).
 */
export function podFieldValue(pod: V1Pod, fieldPath: string, node: NodeFacts, podIP?: string): string | undefined {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath)
  if (m) return (m[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations)?.[m[2]] ?? ''
  switch (fieldPath) {
    case 'metadata.name':
      return pod.metadata?.name ?? ''
    case 'metadata.namespace':
      return pod.metadata?.namespace ?? ''
    case 'metadata.uid':
      return pod.metadata?.uid ?? ''
    case 'metadata.labels':
      return formatMap(pod.metadata?.labels)
    case 'metadata.annotations':
      return formatMap(pod.metadata?.annotations)
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? node.nodeName
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? ''
    case 'status.hostIP':
    case 'status.hostIPs':
      return node.nodeIP
    case 'status.podIP':
    case 'status.podIPs':
      return podIP ?? node.nodeIP
    default:
      return undefined
  }
}

/** The downward API's map format: sorted `key="value"` lines (value JSON-quoted as Go's %q). */
export function formatMap(m: Record<string, string> | undefined): string {
  return Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(m![k])}`)
    .join('\n')
}

/** The kubelet's rounding: the ceiling of value / divisor; an unset limit is the node's allocatable. */
export function resourceFieldValue(container: V1Container, resource: string, divisor: string | number | undefined, node: NodeFacts): string | undefined {
  const [kind, name] = resource.split('.', 2) as ['limits' | 'requests', string]
  if ((kind !== 'limits' && kind !== 'requests') || !['cpu', 'memory', 'ephemeral-storage'].includes(name)) return undefined
  const set = container.resources?.[kind]?.[name]
  const fallback = name === 'cpu' ? node.cpuCores : name === 'memory' ? node.memoryBytes : node.ephemeralStorageBytes
  const limit = container.resources?.limits?.[name]
  const raw = set !== undefined ? parseQuantity(set) : kind === 'limits' ? fallback : limit !== undefined ? parseQuantity(limit) : 0
  const d = divisor === undefined || divisor === '' || divisor === '0' ? 1 : parseQuantity(divisor)
  if (name === 'cpu') return String(Math.ceil(Math.round(raw * 1000) / Math.round(d * 1000)))
  return String(Math.ceil(raw / d))
}

/** The Docker-link-style variables the kubelet derives from Services (pkg/kubelet/envvars). */
export function serviceVariables(services: V1Service[]): Map<string, string> {
  const out = new Map<string, string>()
  for (const s of services) {
    const ip = s.spec?.clusterIP
    const ports = s.spec?.ports ?? []
    if (!ip || ip === 'None' || ports.length === 0) continue
    const prefix = envName(s.metadata!.name!)
    out.set(`${prefix}_SERVICE_HOST`, ip)
    out.set(`${prefix}_SERVICE_PORT`, String(ports[0].port))
    for (const p of ports) if (p.name) out.set(`${prefix}_SERVICE_PORT_${envName(p.name)}`, String(p.port))
    ports.forEach((p, i) => {
      const proto = (p.protocol ?? 'TCP').toUpperCase()
      const url = `${proto.toLowerCase()}://${ip.includes(':') ? `[${ip}]` : ip}:${p.port}`
      if (i === 0) out.set(`${prefix}_PORT`, url)
      const pp = `${prefix}_PORT_${p.port}_${proto}`
      out.set(pp, url)
      out.set(`${pp}_PROTO`, proto.toLowerCase())
      out.set(`${pp}_PORT`, String(p.port))
      out.set(`${pp}_ADDR`, ip)
    })
  }
  return out
}

function envName(name: string): string {
  return name.toUpperCase().replaceAll('-', '_')
}

/**
 * The `kubernetes` Service of the default namespace always; the pod's own
 * namespace's Services when enableServiceLinks (the default).
 */
async function serviceEnvVars(services: ServiceLookup, namespace: string, links: boolean, apiServer: string | undefined): Promise<Map<string, string>> {
  const byName = new Map<string, V1Service>()
  try {
    if (links) for (const s of await services.list(namespace)) byName.set(s.metadata!.name!, s)
    if (!byName.has('kubernetes')) {
      const master = (await services.list('default')).find((s) => s.metadata?.name === 'kubernetes')
      if (master) byName.set('kubernetes', master)
    }
  } catch (error) {
    throw new MissingReference((error as Error).message)
  }
  const master = byName.get('kubernetes')
  if (master && (master.metadata?.namespace ?? 'default') === 'default' && apiServer) byName.set('kubernetes', reachableMaster(master, apiServer))
  return serviceVariables([...byName.values()])
}

/**
 * The `kubernetes` Service as in-cluster config must see it on this node:
 * its ClusterIP is virtual, and nothing on this host may translate it, so
 * KUBERNETES_SERVICE_HOST/PORT name the API server's address as this host
 * reaches it (the kubeconfig's), which its serving certificate covers.
 */
export function reachableMaster(master: V1Service, apiServer: string): V1Service {
  const url = new URL(apiServer)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  const port = Number(url.port || (url.protocol === 'http:' ? 80 : 443))
  return {...master, spec: {...master.spec, clusterIP: host, ports: [{name: 'https', port, protocol: 'TCP'}]}}
}
