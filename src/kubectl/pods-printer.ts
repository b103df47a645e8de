import {PodNetworkAnnotation, PodPidsAnnotation, PodRelayAnnotation, PodSandboxAnnotation, PodWallsAnnotation} from '../common/labels.js'
import type {V1Pod} from '@kubernetes/client-node'
import {columnWidths, fixedWidthLine, formatTable} from './table.js'
import {podRow} from './pod-status.js'

/** Where `-o wide` finds what the pod's node runs pods inside (its vnode.dev/sandbox label, pods-service attachPids). */
export function podSandbox(pod: V1Pod): string {
  return pod.metadata?.annotations?.[PodSandboxAnnotation] || '<none>'
}

/** The walls the pod's node builds around its containers (its vnode.dev/walls annotation, pods-service attachPids). */
export function podWalls(pod: V1Pod): string {
  return pod.metadata?.annotations?.[PodWallsAnnotation] || '<none>'
}

/** Where the pod's node puts pods: `pod` (the pod network), `host: <why>` (pods-service attachPids). */
export function podNetwork(pod: V1Pod): string {
  return pod.metadata?.annotations?.[PodNetworkAnnotation] || '<none>'
}

/**
 * Where the API server reaches a node's kubelet API, in words: `direct`, or
 * `relay <namespace>/<pod>` (its vnode.dev/relay annotation), with the
 * published address when given. Shared by `pods -o wide` and the dashboard.
 */
export function kubeletEndpointText(relay: string | undefined, address?: string): string {
  return `${relay ? `relay ${relay}` : 'direct'}${address ? ` at ${address}` : ''}`
}

/** The ENDPOINT column: set by pods-service attachPids from the pod's node; <none> when the node could not be read. */
export function podEndpoint(pod: V1Pod): string {
  const relay = pod.metadata?.annotations?.[PodRelayAnnotation]
  return relay === undefined ? '<none>' : kubeletEndpointText(relay || undefined)
}

/**
 * Where `-o wide` finds a pod's process ids: `container=pid,...`, as the
 * node's kubelet API reports them in /runningpods/ (pods-service attachPids).
 * Absent (not running, or the node cannot be reached): <none>.
 */
export function podPids(pod: V1Pod): string {
  const raw = pod.metadata?.annotations?.[PodPidsAnnotation]
  if (!raw) return '<none>'
  const pids = raw
    .split(',')
    .map((kv) => kv.split('=').pop()!.trim())
    .filter((p) => /^\d+$/.test(p))
  return pids.length ? pids.join(',') : '<none>'
}

export function podsHeader(wide: boolean, allNamespaces: boolean): string[] {
  return [...(allNamespaces ? ['NAMESPACE'] : []), 'NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'NODE', ...(wide ? ['IP', 'PIDS', 'SANDBOX', 'WALLS', 'NETWORK', 'ENDPOINT'] : [])]
}

export function podCells(pod: V1Pod, wide: boolean, allNamespaces: boolean, now = Date.now()): string[] {
  const r = podRow(pod, now)
  return [
    ...(allNamespaces ? [r.namespace] : []),
    r.name,
    r.ready,
    r.status,
    r.restarts,
    r.age,
    r.node,
    ...(wide ? [r.ip, podPids(pod), podSandbox(pod), podWalls(pod), podNetwork(pod), podEndpoint(pod)] : []),
  ]
}

/** The table `kubectl vnode pods` prints (kubectl get pods columns plus NODE). */
export function podsTable(pods: V1Pod[], opts: {wide: boolean; allNamespaces: boolean; now?: number}): string[] {
  return formatTable(
    podsHeader(opts.wide, opts.allNamespaces),
    pods.map((p) => podCells(p, opts.wide, opts.allNamespaces, opts.now)),
  )
}

/** Appended rows for `-w` when piped: widths fixed by the first table, as kubectl get -w does. */
export class PodWatchPrinter {
  private widths: number[] = []

  constructor(
    private readonly wide: boolean,
    private readonly allNamespaces: boolean,
  ) {}

  initial(pods: V1Pod[], now = Date.now()): string[] {
    const header = podsHeader(this.wide, this.allNamespaces)
    const rows = pods.map((p) => podCells(p, this.wide, this.allNamespaces, now))
    this.widths = columnWidths(header, rows)
    return [fixedWidthLine(header, this.widths), ...rows.map((r) => fixedWidthLine(r, this.widths))]
  }

  row(pod: V1Pod, now = Date.now()): string {
    return fixedWidthLine(podCells(pod, this.wide, this.allNamespaces, now), this.widths)
  }
}

/** A v1 List of pods, as kubectl get -o json|yaml prints several objects. */
export function podList(pods: V1Pod[]): {apiVersion: string; kind: string; items: V1Pod[]; metadata: {resourceVersion: string}} {
  return {apiVersion: 'v1', kind: 'List', items: pods.map((p) => ({...p, apiVersion: 'v1', kind: 'Pod'})), metadata: {resourceVersion: ''}}
}

export function podName(pod: V1Pod): string {
  return `pod/${pod.metadata?.name}`
}
