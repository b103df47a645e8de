import type {NodeUsage} from './node-usage.js'
import type {PodUsage} from './sources.js'

/**
 * /metrics/resource: the kubelet's resource metrics in the Prometheus text
 * format (0.0.4), the names and labels metrics-server reads.
 */

export const MetricsContentType = 'text/plain; version=0.0.4; charset=utf-8'

interface Family {
  name: string
  help: string
  type: 'counter' | 'gauge'
  samples: {labels: Record<string, string>; value: number}[]
}

export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN'
  if (v === Infinity) return '+Inf'
  if (v === -Infinity) return '-Inf'
  return String(v)
}

export function renderFamilies(families: Family[], timestampMs: number): string {
  const out: string[] = []
  for (const f of families) {
    out.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`)
    for (const s of f.samples) {
      const labels = Object.entries(s.labels)
        .map(([k, v]) => `${k}="${escapeLabelValue(v)}"`)
        .join(',')
      out.push(`${f.name}${labels ? `{${labels}}` : ''} ${formatValue(s.value)} ${timestampMs}`)
    }
  }
  return `${out.join('\n')}\n`
}

export function resourceMetrics(node: NodeUsage | undefined, usage: PodUsage[], now = new Date(), scrapeError = false): string {
  // Labels in the order namespace, pod, container (insertion order is written order): readers
  // that take the pod from the second label, as some virtual-kubelet tooling does, find it there.
  const containers = usage.flatMap((p) => p.containers.map((c) => ({labels: {namespace: p.namespace, pod: p.name, container: c.name}, c})))
  const pods = usage.map((p) => ({
    labels: {namespace: p.namespace, pod: p.name},
    cpu: p.containers.reduce((a, c) => a + c.cpuSeconds, 0),
    mem: p.containers.reduce((a, c) => a + c.memoryBytes, 0),
  }))
  const families: Family[] = [
    {
      name: 'container_cpu_usage_seconds_total',
      help: '[STABLE] Cumulative cpu time consumed by the container in core-seconds',
      type: 'counter',
      samples: containers.map(({labels, c}) => ({labels, value: c.cpuSeconds})),
    },
    {
      name: 'container_memory_working_set_bytes',
      help: '[STABLE] Current working set of the container in bytes',
      type: 'gauge',
      samples: containers.map(({labels, c}) => ({labels, value: c.memoryBytes})),
    },
    {
      name: 'container_start_time_seconds',
      help: '[STABLE] Start time of the container since unix epoch in seconds',
      type: 'gauge',
      samples: containers.filter(({c}) => c.startTime).map(({labels, c}) => ({labels, value: c.startTime!.getTime() / 1000})),
    },
  ]
  if (node) {
    families.push(
      {name: 'node_cpu_usage_seconds_total', help: '[STABLE] Cumulative cpu time consumed by the node in core-seconds', type: 'counter', samples: [{labels: {}, value: node.cpuNanoSeconds / 1e9}]},
      {name: 'node_memory_working_set_bytes', help: '[STABLE] Current working set of the node in bytes', type: 'gauge', samples: [{labels: {}, value: node.memoryWorkingSetBytes}]},
    )
  }
  families.push(
    {name: 'pod_cpu_usage_seconds_total', help: '[STABLE] Cumulative cpu time consumed by the pod in core-seconds', type: 'counter', samples: pods.map((p) => ({labels: p.labels, value: p.cpu}))},
    {name: 'pod_memory_working_set_bytes', help: '[STABLE] Current working set of the pod in bytes', type: 'gauge', samples: pods.map((p) => ({labels: p.labels, value: p.mem}))},
    {name: 'resource_scrape_error', help: '[STABLE] 1 if there was an error while getting container metrics, 0 otherwise', type: 'gauge', samples: [{labels: {}, value: scrapeError ? 1 : 0}]},
  )
  return renderFamilies(
    families.filter((f) => f.samples.length > 0 || f.name === 'resource_scrape_error'),
    now.getTime(),
  )
}
