import type {V1ConfigMap, V1OwnerReference, V1Pod} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {RelayProgram, RelayProgramKey} from './relay-program.js'

/**
 * The relay's objects: a ConfigMap with the relay program and a Pod that
 * runs it with a stock image's python3, on another node of the cluster. The
 * pod needs no API access (no service account token) and no privileges.
 */

/** A small public image with python3 that clusters can usually pull (Docker Hub's official python, Alpine variant). */
export const DefaultRelayImage = 'python:3-alpine'
export const DefaultRelayNamespace = 'vnode-system'
/** The relay's public port: the kubelet port, which firewalls between API servers and nodes let through. */
export const DefaultRelayPort = 10250
/** The tunnel port, on the pod's loopback only: reached through pods/portforward, never from the pod network. */
export const DefaultRelayTunnelPort = 10251
export const RelayMountPath = '/vnode-relay'
export const RelayForLabel = 'vnode.dev/relay-for'
export const RelayConfigAnnotation = 'vnode.dev/relay-config'

export interface RelaySpec {
  /** The node the relay serves. */
  node: string
  namespace: string
  image: string
  port: number
  tunnelPort: number
  /** Where the relay may run (it never runs on the node it serves). */
  nodeSelector?: Record<string, string>
}

/** The relay's pod and ConfigMap name: one per node. */
export function relayName(node: string): string {
  const name = `vnode-relay-${node}`
  if (name.length <= 63) return name
  return `vnode-relay-${node.slice(0, 40)}-${createHash('sha256').update(node).digest('hex').slice(0, 8)}`.replace(/[.-]+(?=-)/g, '')
}

export function relayConfigMap(spec: RelaySpec, owner?: V1OwnerReference): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {name: relayName(spec.node), namespace: spec.namespace, labels: labels(spec), ...(owner ? {ownerReferences: [owner]} : {})},
    data: {[RelayProgramKey]: RelayProgram},
  }
}

/** A digest of what the pod runs: an existing relay pod with another one is replaced. */
export function relayConfigHash(spec: RelaySpec): string {
  return createHash('sha256')
    .update(JSON.stringify([spec.image, spec.port, spec.tunnelPort, spec.nodeSelector ?? {}, RelayProgram]))
    .digest('hex')
    .slice(0, 16)
}

export function relayPod(spec: RelaySpec, owner?: V1OwnerReference): V1Pod {
  const name = relayName(spec.node)
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: spec.namespace,
      labels: labels(spec),
      annotations: {[RelayConfigAnnotation]: relayConfigHash(spec)},
      // Deleting the Node deletes its relay (the garbage collector follows a cluster-scoped owner).
      ...(owner ? {ownerReferences: [owner]} : {}),
    },
    spec: {
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 2,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      ...(spec.nodeSelector && Object.keys(spec.nodeSelector).length > 0 ? {nodeSelector: spec.nodeSelector} : {}),
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: 'metadata.name', operator: 'NotIn', values: [spec.node]}]}]},
        },
      },
      containers: [
        {
          name: 'relay',
          image: spec.image,
          command: ['python3', '-u', `${RelayMountPath}/${RelayProgramKey}`],
          env: [
            {name: 'VNODE_RELAY_PORT', value: String(spec.port)},
            {name: 'VNODE_RELAY_TUNNEL_PORT', value: String(spec.tunnelPort)},
            {name: 'PYTHONDONTWRITEBYTECODE', value: '1'},
          ],
          ports: [{name: 'kubelet', containerPort: spec.port, protocol: 'TCP'}],
          resources: {requests: {cpu: '10m', memory: '32Mi'}, limits: {memory: '128Mi'}},
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true},
          volumeMounts: [{name: 'program', mountPath: RelayMountPath, readOnly: true}],
        },
      ],
      volumes: [{name: 'program', configMap: {name, defaultMode: 0o444}}],
    },
  }
}

function labels(spec: RelaySpec): Record<string, string> {
  return {'app.kubernetes.io/name': 'vnode-relay', 'app.kubernetes.io/managed-by': 'kubectl-vnode', [RelayForLabel]: spec.node.slice(0, 63).replace(/[^a-z0-9]+$/, '')}
}
