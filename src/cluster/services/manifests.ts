/**
 * The API objects that make host processes cluster services: RBAC for each
 * service's own user, and selector-less Services whose Endpoints name the
 * host address the process listens on (the endpoint-slice mirroring
 * controller turns them into EndpointSlices for kube-proxy). Applied with
 * the cluster's kubectl, so re-running `cluster up` updates them in place.
 */

export const MetricsServerUser = 'system:metrics-server'
export const CoreDnsUser = 'system:coredns'
export const KubeProxyUser = 'system:kube-proxy'
/** The cluster DNS Service's address: the tenth of the service range, as kubeadm picks it. */
export const DefaultClusterDnsIp = '10.0.0.10'
export const ClusterDomain = 'cluster.local'

type Obj = Record<string, unknown>

const user = (name: string) => ({kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name})

function clusterRole(name: string, rules: Obj[]): Obj {
  return {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name}, rules}
}

function clusterRoleBinding(name: string, role: string, subject: string): Obj {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: {name},
    roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role},
    subjects: [user(subject)],
  }
}

interface HostEndpoint {
  name: string
  hostIp: string
  ports: Array<{name: string; port: number; targetPort: number; protocol: 'TCP' | 'UDP'}>
  clusterIp?: string
  labels?: Record<string, string>
}

/** A Service without a selector and the Endpoints that point it at a host process. */
function hostService(ep: HostEndpoint): Obj[] {
  const metadata = {name: ep.name, namespace: 'kube-system', labels: {...ep.labels, 'app.kubernetes.io/managed-by': 'kubectl-vnode'}}
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata,
      spec: {
        ...(ep.clusterIp ? {clusterIP: ep.clusterIp} : {}),
        ports: ep.ports.map((p) => ({name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol})),
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata,
      subsets: [{addresses: [{ip: ep.hostIp}], ports: ep.ports.map((p) => ({name: p.name, port: p.targetPort, protocol: p.protocol}))}],
    },
  ]
}

export function metricsServerObjects(hostIp: string, port: number, caBundle: string): Obj[] {
  return [
    clusterRole(MetricsServerUser, [
      {apiGroups: [''], resources: ['nodes/metrics'], verbs: ['get']},
      {apiGroups: [''], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch']},
    ]),
    clusterRoleBinding(MetricsServerUser, MetricsServerUser, MetricsServerUser),
    clusterRoleBinding('metrics-server:system:auth-delegator', 'system:auth-delegator', MetricsServerUser),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {name: 'metrics-server-auth-reader', namespace: 'kube-system'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'extension-apiserver-authentication-reader'},
      subjects: [user(MetricsServerUser)],
    },
    ...hostService({name: 'metrics-server', hostIp, ports: [{name: 'https', port: 443, targetPort: port, protocol: 'TCP'}], labels: {'k8s-app': 'metrics-server'}}),
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: {name: 'v1beta1.metrics.k8s.io'},
      spec: {
        service: {name: 'metrics-server', namespace: 'kube-system', port: 443},
        group: 'metrics.k8s.io',
        version: 'v1beta1',
        caBundle,
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    },
  ]
}

export function coreDnsObjects(hostIp: string, port: number, clusterIp: string): Obj[] {
  return [
    clusterRole(CoreDnsUser, [
      {apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch']},
      {apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch']},
    ]),
    clusterRoleBinding(CoreDnsUser, CoreDnsUser, CoreDnsUser),
    ...hostService({
      name: 'kube-dns',
      hostIp,
      clusterIp,
      labels: {'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS'},
      ports: [
        {name: 'dns', port: 53, targetPort: port, protocol: 'UDP'},
        {name: 'dns-tcp', port: 53, targetPort: port, protocol: 'TCP'},
      ],
    }),
  ]
}

/** A List kubectl applies in one call. */
export function asList(items: Obj[]): string {
  return JSON.stringify({apiVersion: 'v1', kind: 'List', items})
}
