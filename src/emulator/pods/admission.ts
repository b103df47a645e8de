import {allContainers} from '../../common/pods.js'
import {EventReason, outOfResourceReason} from '../kube/event-reasons.js'
import {addRequests, podRequests, type Requests} from '../pod-requests.js'
import type {V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Pod, V1Taint, V1Toleration} from '@kubernetes/client-node'
import {parseQuantity} from '../quantity.js'
import {isStaticPod} from './config.js'

/**
 * The kubelet's admission before a pod starts (lifecycle/predicate.go and the
 * scheduler's AdmissionCheck): resources against allocatable, node
 * affinity/selector, host ports, then NoExecute taints. Only the first failure
 * is reported. Pure: the node view and the admitted pods are passed in.
 */

/** What admission needs to know about the node (from the API, or the emulator's own view). */
export interface AdmissionNode {
  name: string
  labels: Record<string, string>
  taints: V1Taint[]
  /** status.allocatable as quantities (cpu, memory, pods, ...). */
  allocatable: Record<string, string>
  /** The namespaces whose pods may run here (`up --allowed-namespaces`); undefined: every namespace. */
  allowedNamespaces?: readonly string[]
}

/**
 * Who may run pods here: a pod from a namespace the node was not started
 * for runs nothing. Static pods are the node's own files and always pass.
 */
export function admitNamespace(pod: V1Pod, node: AdmissionNode): AdmitResult {
  const allowed = node.allowedNamespaces
  const ns = pod.metadata?.namespace ?? 'default'
  if (!allowed || allowed.includes(ns) || isStaticPod(pod)) return {admit: true}
  return {
    admit: false,
    reason: EventReason.NamespaceNotAllowed,
    message: `namespace "${ns}" may not run pods on node "${node.name}" (allowed: ${allowed.join(', ') || 'none'}; see kubectl vnode up --allowed-namespaces)`,
  }
}

export type AdmitResult = {admit: true} | {admit: false; reason: string; message: string}

export const RejectedMessagePrefix = 'Pod was rejected: '
export const NodeShutdownReason = EventReason.NodeShutdown
export const NodeShutdownRejectMessage = 'Pod was rejected as the node is shutting down.'

function capacityOf(node: AdmissionNode, resource: string): number | undefined {
  const q = node.allocatable[resource]
  if (q === undefined) return undefined
  const v = parseQuantity(String(q))
  return resource === 'cpu' ? Math.round(v * 1000) : Math.floor(v)
}

function fitsResources(pod: V1Pod, node: AdmissionNode, others: V1Pod[]): AdmitResult {
  const pods = capacityOf(node, 'pods')
  if (pods !== undefined && others.length + 1 > pods) {
    return {admit: false, reason: outOfResourceReason('pods'), message: `Node didn't have enough resource: pods, requested: 1, used: ${others.length}, capacity: ${pods}`}
  }
  const want = podRequests(pod)
  const used: Requests = {}
  for (const o of others) addRequests(used, podRequests(o))
  // cpu and memory first, in the kubelet's order, then anything else requested.
  const names = [
    'cpu',
    'memory',
    'ephemeral-storage',
    ...Object.keys(want)
      .filter((k) => !['cpu', 'memory', 'ephemeral-storage'].includes(k))
      .sort(),
  ]
  for (const name of names) {
    const requested = want[name] ?? 0
    if (requested === 0) continue
    const capacity = capacityOf(node, name) ?? 0
    const u = used[name] ?? 0
    if (requested + u > capacity) {
      return {admit: false, reason: outOfResourceReason(name), message: `Node didn't have enough resource: ${name}, requested: ${requested}, used: ${u}, capacity: ${capacity}`}
    }
  }
  return {admit: true}
}

function matchesRequirement(value: string | undefined, r: V1NodeSelectorRequirement): boolean {
  const values = r.values ?? []
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value)
    case 'NotIn':
      return value === undefined || !values.includes(value)
    case 'Exists':
      return value !== undefined
    case 'DoesNotExist':
      return value === undefined
    case 'Gt':
    case 'Lt': {
      if (value === undefined || values.length !== 1) return false
      const a = Number.parseInt(value, 10)
      const b = Number.parseInt(values[0], 10)
      if (Number.isNaN(a) || Number.isNaN(b)) return false
      return r.operator === 'Gt' ? a > b : a < b
    }
    default:
      return false
  }
}

function matchesTerm(node: AdmissionNode, term: V1NodeSelectorTerm): boolean {
  const exprs = term.matchExpressions ?? []
  const fields = term.matchFields ?? []
  // An empty term matches nothing (nodeaffinity helpers).
  if (exprs.length === 0 && fields.length === 0) return false
  return exprs.every((r) => matchesRequirement(node.labels[r.key], r)) && fields.every((r) => matchesRequirement(r.key === 'metadata.name' ? node.name : undefined, r))
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed, requirements ANDed). */
export function matchesNodeAffinity(pod: V1Pod, node: AdmissionNode): boolean {
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) if (node.labels[k] !== v) return false
  const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
  if (!required) return true
  return (required.nodeSelectorTerms ?? []).some((t) => matchesTerm(node, t))
}

/** Toleration.ToleratesTaint. */
export function tolerates(t: V1Toleration, taint: V1Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false
  if (t.key && t.key !== taint.key) return false
  if (!t.key && t.operator !== 'Exists') return false
  if (t.operator === 'Exists') return true
  return (t.value ?? '') === (taint.value ?? '')
}

function hostPorts(pod: V1Pod): string[] {
  const out: string[] = []
  for (const c of allContainers(pod)) {
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`${p.protocol ?? 'TCP'}/${p.hostIP || '0.0.0.0'}/${p.hostPort}`)
  }
  return out
}

function portsConflict(pod: V1Pod, others: V1Pod[]): boolean {
  const taken = new Set(others.flatMap(hostPorts))
  return hostPorts(pod).some((p) => {
    const [proto, ip, port] = p.split('/')
    if (taken.has(p)) return true
    // 0.0.0.0 conflicts with every address on the same port and protocol.
    return [...taken].some((q) => {
      const [qp, qip, qport] = q.split('/')
      return qp === proto && qport === port && (ip === '0.0.0.0' || qip === '0.0.0.0')
    })
  })
}

const predicate = (name: string, why: string): AdmitResult => ({admit: false, reason: name, message: `Predicate ${name} failed: ${why}`})

/** The first admission failure for pod on node, given the pods already admitted there. */
export function admitPod(pod: V1Pod, node: AdmissionNode, admitted: V1Pod[]): AdmitResult {
  const namespace = admitNamespace(pod, node)
  if (!namespace.admit) return namespace
  const others = admitted.filter((p) => p.metadata?.uid !== pod.metadata?.uid)
  let fit: AdmitResult
  try {
    fit = fitsResources(pod, node, others)
  } catch (error) {
    return {admit: false, reason: EventReason.UnexpectedAdmissionError, message: `invalid resource quantity: ${(error as Error).message}`}
  }
  if (!fit.admit) return fit
  if (!matchesNodeAffinity(pod, node)) return predicate(EventReason.NodeAffinity, "node(s) didn't match Pod's node affinity/selector")
  if (pod.spec?.nodeName && pod.spec.nodeName !== node.name) return predicate(EventReason.NodeName, "node(s) didn't match the requested node name")
  if (portsConflict(pod, others)) return predicate(EventReason.NodePorts, "node(s) didn't have free ports for the requested pod ports")
  const untolerated = node.taints.filter((t) => t.effect === 'NoExecute' && !(pod.spec?.tolerations ?? []).some((tol) => tolerates(tol, t)))
  if (untolerated.length) return predicate(EventReason.TaintToleration, "node(s) had taints that the pod didn't tolerate")
  return {admit: true}
}
