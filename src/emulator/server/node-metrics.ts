import type {SandboxPoolFigures} from '../provider/pool.js'
import {renderFamilies} from './metrics.js'

/** What the node's /metrics serves: its warm pool (undefined: no pod network, no pool) and its heap trims. */
export interface NodeFigures {
  pool?: SandboxPoolFigures
  heapTrims?: number
}

/**
 * /metrics: the node's own figures in the Prometheus text format, as the
 * kubelet serves its own there. vnode's are the warm pool of pod sandboxes
 * (a node without a pool, no pod network, has none of its families) and
 * the full collections that gave a burst's heap back (heap-trim.ts).
 */
export function nodeMetrics(figures: NodeFigures, now = new Date()): string {
  return renderFamilies([...(figures.pool ? poolFamilies(figures.pool) : []), ...(figures.heapTrims === undefined ? [] : heapTrimFamilies(figures.heapTrims))], now.getTime())
}

function heapTrimFamilies(heapTrims: number) {
  return [
    {
      name: 'vnode_heap_trims_total',
      help: 'Full collections run once a burst of pod starts or stops was over, to give its heap back',
      type: 'counter' as const,
      samples: [{labels: {}, value: heapTrims}],
    },
  ]
}

function poolFamilies(pool: SandboxPoolFigures) {
  const gauge = (name: string, help: string, value: number) => ({name, help, type: 'gauge' as const, samples: [{labels: {}, value}]})
  const counter = (name: string, help: string, value: number) => ({name, help, type: 'counter' as const, samples: [{labels: {}, value}]})
  /** One family, a sample per value of one label. */
  const byLabel = (name: string, help: string, type: 'gauge' | 'counter', label: string, values: Record<string, number>) => ({
    name,
    help,
    type,
    samples: Object.entries(values).map(([v, value]) => ({labels: {[label]: v}, value})),
  })
  return [
    byLabel('vnode_sandbox_pool_entries', 'Entries of the warm pool of pod network sandboxes, by state (ready to lease, being made)', 'gauge', 'state', {ready: pool.ready, making: pool.making}),
    gauge('vnode_sandbox_pool_target_entries', 'Entries the pool is sized to now: the largest burst of pod starts of the last minutes', pool.target),
    gauge('vnode_sandbox_pool_floor_entries', 'Entries the pool keeps however quiet the node is', pool.floor),
    gauge('vnode_sandbox_pool_cap_entries', 'Entries the pool never exceeds', pool.cap),
    byLabel('vnode_sandbox_pool_leases_total', 'Pod sandbox setups that took a ready entry (hit) or found the pool empty (miss)', 'counter', 'result', {hit: pool.hits, miss: pool.misses}),
    counter('vnode_sandbox_pool_failures_total', 'Pool entries that could not be made', pool.failures),
    counter('vnode_sandbox_pool_broken_total', 'Pool entries found unusable at lease (their namespace gone) and destroyed', pool.broken),
  ]
}
