import type {V1Pod} from '@kubernetes/client-node'
import type {NodeUsage} from './node-usage.js'
import {CpuRates} from './rates.js'
import {podKey, type PodUsage} from './sources.js'

/** The kubelet's stats/v1alpha1 Summary, the CPU and memory part (what vnode can measure). */
export interface CpuStats {
  time: string
  usageNanoCores?: number
  usageCoreNanoSeconds: number
}

export interface MemoryStats {
  time: string
  availableBytes?: number
  usageBytes: number
  workingSetBytes: number
  rssBytes: number
  pageFaults?: number
  majorPageFaults?: number
}

export interface ContainerStats {
  name: string
  startTime: string
  cpu: CpuStats
  memory: MemoryStats
}

export interface PodStats {
  podRef: {name: string; namespace: string; uid: string}
  startTime: string
  containers: ContainerStats[]
  cpu: CpuStats
  memory: MemoryStats
  process_stats: {process_count: number}
}

export interface Summary {
  node: {nodeName: string; startTime: string; cpu: CpuStats; memory: MemoryStats}
  pods: PodStats[]
}

/** metav1.Time's JSON: RFC 3339 in seconds. */
export function metaTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function podStart(pod: V1Pod | undefined, fallback: Date): Date {
  const t = pod?.status?.startTime ?? pod?.metadata?.creationTimestamp
  return t ? new Date(t) : fallback
}

/** Builds Summaries, keeping the previous CPU readings to report rates. */
export class SummaryBuilder {
  private readonly rates = new CpuRates()

  build(nodeName: string, node: NodeUsage, usage: PodUsage[], pods: V1Pod[], now = new Date()): Summary {
    const time = metaTime(now)
    const at = now.getTime()
    const keep = new Set<string>(['node'])
    const nodeCpu: CpuStats = {time, usageCoreNanoSeconds: Math.round(node.cpuNanoSeconds)}
    const nodeRate = this.rates.rate('node', node.cpuNanoSeconds, at, node.bootTime.getTime())
    if (nodeRate !== undefined) nodeCpu.usageNanoCores = nodeRate
    const byKey = new Map(pods.map((p) => [podKey(p.metadata?.namespace ?? '', p.metadata?.name ?? ''), p]))
    const podStats = usage.map((u): PodStats => {
      const pod = byKey.get(podKey(u.namespace, u.name))
      const started = podStart(pod, now)
      let cpuNs = 0
      let memBytes = 0
      let usageBytes = 0
      let rssBytes = 0
      const containers = u.containers.map((c): ContainerStats => {
        const key = `${u.uid}/${c.name}`
        keep.add(key)
        const ns = Math.round(c.cpuSeconds * 1e9)
        cpuNs += ns
        memBytes += c.memoryBytes
        usageBytes += c.memoryUsageBytes ?? c.memoryBytes
        rssBytes += c.memoryRssBytes ?? c.memoryBytes
        const cpu: CpuStats = {time, usageCoreNanoSeconds: ns}
        const rate = this.rates.rate(key, ns, at, c.startTime?.getTime())
        if (rate !== undefined) cpu.usageNanoCores = rate
        return {
          name: c.name,
          startTime: metaTime(c.startTime ?? started),
          cpu,
          memory: {time, usageBytes: c.memoryUsageBytes ?? c.memoryBytes, workingSetBytes: c.memoryBytes, rssBytes: c.memoryRssBytes ?? c.memoryBytes},
        }
      })
      const cpu: CpuStats = {time, usageCoreNanoSeconds: cpuNs}
      const podRate = this.rates.rate(u.uid, cpuNs, at, started.getTime())
      keep.add(u.uid)
      if (podRate !== undefined) cpu.usageNanoCores = podRate
      return {
        podRef: {name: u.name, namespace: u.namespace, uid: u.uid},
        startTime: metaTime(started),
        containers,
        cpu,
        memory: {time, usageBytes, workingSetBytes: memBytes, rssBytes},
        process_stats: {process_count: u.containers.filter((c) => c.pid !== undefined).length},
      }
    })
    this.rates.retain(keep)
    return {
      node: {
        nodeName,
        startTime: metaTime(node.bootTime),
        cpu: nodeCpu,
        memory: {
          time,
          availableBytes: Math.max(0, node.memoryTotalBytes - node.memoryWorkingSetBytes),
          usageBytes: node.memoryUsageBytes,
          workingSetBytes: node.memoryWorkingSetBytes,
          rssBytes: node.memoryRssBytes,
          pageFaults: node.pageFaults,
          majorPageFaults: node.majorPageFaults,
        },
      },
      pods: podStats,
    }
  }

  get trackedReadings(): number {
    return this.rates.size
  }
}
