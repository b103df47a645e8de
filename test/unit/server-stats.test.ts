import {describe, expect, test} from '@jest/globals'
import {mkdtempSync, rmSync, statSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import {X509Certificate} from 'node:crypto'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {escapeLabelValue, resourceMetrics} from '../../src/emulator/server/metrics.js'
import {type NodeUsage, parseMeminfo, parseProcStat, readNodeUsage} from '../../src/emulator/server/node-usage.js'
import {CpuRates} from '../../src/emulator/server/rates.js'
import {ensureServingCert} from '../../src/emulator/server/serving-cert.js'
import type {PodUsage} from '../../src/emulator/server/sources.js'
import {SummaryBuilder} from '../../src/emulator/server/summary.js'

const node: NodeUsage = {
  cpuNanoSeconds: 500e9,
  memoryTotalBytes: 8e9,
  memoryUsageBytes: 3e9,
  memoryWorkingSetBytes: 2e9,
  memoryRssBytes: 1e9,
  pageFaults: 10,
  majorPageFaults: 1,
  bootTime: new Date('2026-01-01T00:00:00Z'),
}
const started = new Date('2026-01-02T03:00:00Z')
const usage: PodUsage[] = [
  {
    namespace: 'ns',
    name: 'web',
    uid: 'u1',
    containers: [
      {name: 'app', cpuSeconds: 1.5, memoryBytes: 1000, pid: 42, startTime: started},
      {name: 'side"car', cpuSeconds: 0.5, memoryBytes: 24, startTime: started},
    ],
  },
]

describe('node usage from /proc', () => {
  test('parses /proc/stat and /proc/meminfo', () => {
    const stat = parseProcStat('cpu  100 5 50 9000 20 3 2 1 0 0\ncpu0 1 2 3 4\nbtime 1767225600\n')
    expect(stat.busyTicks).toBe(161)
    expect(stat.bootTime?.toISOString()).toBe('2026-01-01T00:00:00.000Z')
    expect(parseMeminfo('MemTotal:       16 kB\nInactive(file):  2 kB\nHugePages_Total:       0\n')).toEqual({MemTotal: 16384, 'Inactive(file)': 2048, HugePages_Total: 0})
  })

  test('reads this host', () => {
    const n = readNodeUsage()
    expect(n.cpuNanoSeconds).toBeGreaterThan(0)
    expect(n.memoryWorkingSetBytes).toBeGreaterThan(0)
    expect(n.memoryWorkingSetBytes).toBeLessThanOrEqual(n.memoryTotalBytes)
  })
})

describe('stats summary', () => {
  test('node, pod and container CPU and memory in the kubelet shape, with rates between readings', () => {
    const b = new SummaryBuilder()
    const now = new Date('2026-01-02T03:00:10Z')
    const s = b.build('n1', node, usage, [], now)
    expect(s.node).toMatchObject({nodeName: 'n1', startTime: '2026-01-01T00:00:00Z', cpu: {time: '2026-01-02T03:00:10Z', usageCoreNanoSeconds: 500e9}})
    expect(s.node.memory).toMatchObject({workingSetBytes: 2e9, availableBytes: 6e9, usageBytes: 3e9})
    const pod = s.pods[0]
    expect(pod.podRef).toEqual({name: 'web', namespace: 'ns', uid: 'u1'})
    expect(pod.cpu.usageCoreNanoSeconds).toBe(2e9)
    expect(pod.memory.workingSetBytes).toBe(1024)
    expect(pod.process_stats.process_count).toBe(1)
    const app = pod.containers.find((c) => c.name === 'app')!
    expect(app.cpu.usageCoreNanoSeconds).toBe(1.5e9)
    // First reading: the average since the container started (1.5 s of CPU in 10 s).
    expect(app.cpu.usageNanoCores).toBe(150_000_000)
    expect(app.memory.workingSetBytes).toBe(1000)
    expect(app.startTime).toBe('2026-01-02T03:00:00Z')
    const later = new Date('2026-01-02T03:00:20Z')
    const more: PodUsage[] = [{...usage[0], containers: [{...usage[0].containers[0], cpuSeconds: 6.5}]}]
    const s2 = b.build('n1', node, more, [], later)
    // Second reading: the rate over the last 10 s (5 s of CPU).
    expect(s2.pods[0].containers[0].cpu.usageNanoCores).toBe(500_000_000)
    // The side car is gone: its reading is forgotten.
    b.build('n1', node, [], [], later)
    expect(b.trackedReadings).toBe(1)
  })

  test('rates keep the older reading for short intervals', () => {
    const r = new CpuRates(1000)
    expect(r.rate('k', 0, 0)).toBeUndefined()
    expect(r.rate('k', 1e8, 100)).toBe(1e9)
    expect(r.rate('k', 2e8, 2000)).toBe(1e8)
  })
})

describe('resource metrics', () => {
  test('Prometheus text with the names and labels metrics-server reads', () => {
    const text = resourceMetrics(node, usage, new Date(1_800_000_000_000))
    expect(text).toContain('# TYPE container_cpu_usage_seconds_total counter\n')
    expect(text).toContain('container_cpu_usage_seconds_total{namespace="ns",pod="web",container="app"} 1.5 1800000000000\n')
    expect(text).toContain('container_memory_working_set_bytes{namespace="ns",pod="web",container="side\\"car"} 24 1800000000000\n')
    expect(text).toContain('container_start_time_seconds{namespace="ns",pod="web",container="app"} 1767322800 1800000000000\n')
    expect(text).toContain('node_cpu_usage_seconds_total 500 1800000000000\n')
    expect(text).toContain('node_memory_working_set_bytes 2000000000 1800000000000\n')
    expect(text).toContain('pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 2 1800000000000\n')
    expect(text).toContain('pod_memory_working_set_bytes{namespace="ns",pod="web"} 1024 1800000000000\n')
    expect(text).toContain('resource_scrape_error 0 1800000000000\n')
    expect(resourceMetrics(undefined, [], new Date(0), true)).toBe(
      '# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 1 0\n',
    )
    expect(escapeLabelValue('a\\b\n"c"')).toBe('a\\\\b\\n\\"c\\"')
  })
})

describe('serving certificate', () => {
  test('issued for the node names in a private pki dir, kept across restarts, reissued when the names change', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-cert-'))
    try {
      const first = await ensureServingCert(dir, 'n1', ['n1', '192.0.2.7', 'localhost'])
      const x = new X509Certificate(first.cert)
      expect(x.subject).toContain('CN=system:node:n1')
      expect(x.subject).toContain('O=system:nodes')
      expect(x.checkIP('192.0.2.7')).toBe('192.0.2.7')
      expect(x.checkHost('n1')).toBe('n1')
      expect(x.verify(new X509Certificate(await readFile(first.caCert)).publicKey)).toBe(true)
      expect(statSync(join(dir, 'pki')).mode & 0o777).toBe(0o700)
      expect(statSync(first.pair.key).mode & 0o777).toBe(0o600)
      const again = await ensureServingCert(dir, 'n1', ['n1', '192.0.2.7', 'localhost'])
      expect(again.cert.equals(first.cert)).toBe(true)
      const moved = await ensureServingCert(dir, 'n1', ['n1', '192.0.2.8', 'localhost'])
      expect(moved.cert.equals(first.cert)).toBe(false)
      expect(new X509Certificate(moved.cert).checkIP('192.0.2.8')).toBe('192.0.2.8')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
