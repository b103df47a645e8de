import {PodPidsAnnotation} from '../emulator/node/node-status.js'
import type {V1Pod} from '@kubernetes/client-node'
import {columnWidths, fixedWidthLine, formatTable} from './table.js'
import {podRow} from './pod-status.js'

/**
 * Where `-o wide` finds a pod's process ids: `container=pid,...`, as the
 * node's kubelet API reports them in /runningpods/ (pods-service attachPids).
 * Absent (not running, or the node cannot be reached): <none>.
 */
export {PodPidsAnnotation}

/** Where `-o wide` finds what the pod's node runs pods inside (its vnode.dev/sandbox label, pods-service attachPids). */
export const PodSandboxAnnotation = 'vnode.dev/sandbox'

export function podSandbox(pod: V1Pod): string {
  return pod.metadata?.annotations?.[PodSandboxAnnotation] || '<none>'
}

export type PodsOutput = 'table' | 'wide' | 'json' | 'yaml' | 'name'

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
  return [...(allNamespaces ? ['NAMESPACE'] : []), 'NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'NODE', ...(wide ? ['IP', 'PIDS', 'SANDBOX'] : [])]
}

export function podCells(pod: V1Pod, wide: boolean, allNamespaces: boolean, now = Date.now()): string[] {
  const r = podRow(pod, now)
  return [...(allNamespaces ? [r.namespace] : []), r.name, r.ready, r.status, r.restarts, r.age, r.node, ...(wide ? [r.ip, podPids(pod), podSandbox(pod)] : [])]
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
