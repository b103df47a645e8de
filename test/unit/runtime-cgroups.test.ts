import {describe, expect, test} from '@jest/globals'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {spawn} from 'node:child_process'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {detectCgroups} from '../../src/emulator/runtime/cgroups/detect.js'
import {workingSet} from '../../src/emulator/runtime/cgroups/driver.js'
import {containerCgroupName, containerCgroupPath, nodeRootName, ownDir, parseMountinfo, parseProcCgroup, podCgroupPath, podUidOf} from '../../src/emulator/runtime/cgroups/layout.js'
import {changedResources, infeasibleMessage, resizeCompletedMessage, resizeNeedsRestart, statusResources} from '../../src/emulator/runtime/cgroups/resize.js'
import {burstableShares, computeQos, containerResources, milliCpuToQuota, milliCpuToShares, podQos, podResources, sharesToWeight} from '../../src/emulator/runtime/cgroups/resources.js'
import {CgroupV2} from '../../src/emulator/runtime/cgroups/v2.js'
import {CgroupV1, type V1Controller} from '../../src/emulator/runtime/cgroups/v1.js'

const c = (name: string, resources?: V1Container['resources'], extra: Partial<V1Container> = {}): V1Container => ({name, image: 'x', ...(resources ? {resources} : {}), ...extra})
const pod = (containers: V1Container[], initContainers: V1Container[] = []): V1Pod => ({
  metadata: {uid: 'u-1', name: 'p', namespace: 'ns'},
  spec: {containers, ...(initContainers.length ? {initContainers} : {})},
})

describe('resource conversions, as the kubelet computes them', () => {
  test('shares and CFS quota from millicores (cm/helpers_linux.go)', () => {
    expect(milliCpuToShares(0)).toBe(2)
    expect(milliCpuToShares(1)).toBe(2)
    expect(milliCpuToShares(100)).toBe(102)
    expect(milliCpuToShares(1000)).toBe(1024)
    expect(milliCpuToShares(10_000_000)).toBe(262_144)
    expect(milliCpuToQuota(0)).toBe(0)
    expect(milliCpuToQuota(200)).toBe(20_000)
    expect(milliCpuToQuota(5)).toBe(1_000)
    expect(sharesToWeight(2)).toBe(1)
    expect(sharesToWeight(1024)).toBe(39)
    expect(sharesToWeight(262_144)).toBe(10_000)
  })

  test('QoS classes: Guaranteed (every limit equals its request), BestEffort (nothing), else Burstable', () => {
    expect(computeQos(pod([c('a')]))).toBe('BestEffort')
    expect(computeQos(pod([c('a', {limits: {cpu: '1', memory: '1Gi'}})]))).toBe('Guaranteed')
    expect(computeQos(pod([c('a', {limits: {cpu: '1', memory: '1Gi'}}), c('b')]))).toBe('Burstable')
    expect(computeQos(pod([c('a', {requests: {cpu: '500m'}, limits: {cpu: '1', memory: '1Gi'}})]))).toBe('Burstable')
    expect(computeQos(pod([c('a', {limits: {memory: '64Mi'}})]))).toBe('Burstable')
    // The API's own verdict wins.
    expect(podQos({...pod([c('a')]), status: {qosClass: 'Burstable'}})).toBe('Burstable')
  })

  test('a container: shares from the request (else the limit), quota from the limit, the memory limit', () => {
    expect(containerResources(c('a', {requests: {cpu: '100m'}, limits: {cpu: '200m', memory: '64Mi'}}))).toEqual({
      cpuShares: 102,
      cpuQuota: 20_000,
      cpuPeriod: 100_000,
      memoryLimit: 64 * 2 ** 20,
      pidsLimit: -1,
    })
    expect(containerResources(c('a', {limits: {cpu: '1'}}))).toMatchObject({cpuShares: 1024, cpuQuota: 100_000, memoryLimit: -1})
    expect(containerResources(c('a'))).toMatchObject({cpuShares: 2, cpuQuota: -1, memoryLimit: -1})
  })

  test('a pod: sums, quota and memory only when every container declares them (ResourceConfigForPod)', () => {
    const guaranteed = pod([c('a', {limits: {cpu: '500m', memory: '64Mi'}}), c('b', {limits: {cpu: '250m', memory: '32Mi'}})])
    expect(podResources(guaranteed)).toEqual({cpuShares: 768, cpuQuota: 75_000, cpuPeriod: 100_000, memoryLimit: 96 * 2 ** 20, pidsLimit: -1})
    const partial = pod([c('a', {limits: {cpu: '500m', memory: '64Mi'}}), c('b', {requests: {cpu: '100m'}})])
    expect(podResources(partial)).toMatchObject({cpuShares: 614, cpuQuota: -1, memoryLimit: -1})
    expect(podResources(pod([c('a')]), 100)).toMatchObject({cpuShares: 2, cpuQuota: -1, memoryLimit: -1, pidsLimit: 100})
    // An init container counts alone (max), sidecars with the rest (sum).
    const withInit = pod(
      [c('a', {limits: {cpu: '100m', memory: '10Mi'}})],
      [c('init', {limits: {cpu: '1', memory: '100Mi'}}), c('side', {limits: {cpu: '100m', memory: '10Mi'}}, {restartPolicy: 'Always'})],
    )
    expect(podResources(withInit)).toMatchObject({cpuQuota: 100_000, memoryLimit: 100 * 2 ** 20})
  })

  test("the burstable class shares the sum of its pods' cpu requests", () => {
    const b1 = pod([c('a', {requests: {cpu: '300m'}})])
    const g = pod([c('a', {limits: {cpu: '1', memory: '1Gi'}})])
    expect(burstableShares([b1, b1, g])).toBe(milliCpuToShares(600))
    expect(burstableShares([])).toBe(2)
  })
})

describe('the layout', () => {
  test('node root per node and state dir; pods under their QoS class; a container by its id', () => {
    expect(nodeRootName('n1', '/a')).toMatch(/^vnode-n1-[0-9a-f]{8}$/)
    expect(nodeRootName('n1', '/a')).not.toBe(nodeRootName('n1', '/b'))
    expect(nodeRootName('n1', '/a')).toBe(nodeRootName('n1', '/a/'))
    expect(podCgroupPath('Guaranteed', 'u')).toBe('podu')
    expect(podCgroupPath('Burstable', 'u')).toBe('burstable/podu')
    expect(podCgroupPath('BestEffort', 'u')).toBe('besteffort/podu')
    expect(containerCgroupPath('burstable/podu', 'vnode://abc')).toBe('burstable/podu/abc')
    expect(() => containerCgroupName('vnode://../x')).toThrow(/invalid container id/)
    expect(podUidOf('burstable/podu-1/abc')).toBe('u-1')
    expect(podUidOf('podu-2')).toBe('u-2')
  })

  test('/proc/self/cgroup and mountinfo: each hierarchy and where vnode is in it', () => {
    const own = parseProcCgroup('4:memory:/process_api/x\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/user.slice\n')
    expect(own.v1.get('memory')).toBe('/process_api/x')
    expect(own.v1.get('cpuacct')).toBe('/')
    expect(own.v2).toBe('/user.slice')
    const mounts = parseMountinfo(
      [
        '30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory',
        '31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
        '32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate',
        '33 25 0:29 /process_api /mnt/cg rw - cgroup cgroup rw,pids',
        '22 1 8:1 / / rw - ext4 /dev/vda rw',
      ].join('\n'),
    )
    expect(mounts.map((m) => [m.mountPoint, m.version, m.controllers])).toEqual([
      ['/sys/fs/cgroup/memory', 1, ['memory']],
      ['/sys/fs/cgroup/cpu,cpuacct', 1, ['cpu', 'cpuacct']],
      ['/sys/fs/cgroup/unified', 2, []],
      ['/mnt/cg', 1, ['pids']],
    ])
    expect(ownDir(mounts[0], '/process_api/x')).toBe('/sys/fs/cgroup/memory/process_api/x')
    expect(ownDir(mounts[3], '/process_api/x')).toBe('/mnt/cg/x')
    expect(ownDir(mounts[3], '/other')).toBeUndefined()
  })

  test('detection: none when asked, or when nothing is mounted, with the reason', () => {
    expect(detectCgroups('none')).toEqual({mode: 'none', reason: 'cgroups were turned off (--cgroups none)'})
    const none = detectCgroups('auto', {mountinfo: '22 1 8:1 / / rw - ext4 /dev/vda rw', procCgroup: '0::/'})
    expect(none.mode).toBe('none')
    expect(none.reason).toBe('cgroup v2: not mounted; cgroup v1: cpu, cpuacct, memory, pids not mounted')
  })

  test('working set: usage minus inactive file, never below zero', () => {
    expect(workingSet(100, 30)).toBe(70)
    expect(workingSet(100, 300)).toBe(0)
  })
})

describe('resize decisions', () => {
  const before = c('a', {requests: {cpu: '100m', memory: '64Mi'}, limits: {cpu: '200m', memory: '64Mi'}})
  test('what changed, and whether resizePolicy asks for a restart', () => {
    expect(changedResources(before.resources, {requests: {cpu: '0.1', memory: '64Mi'}, limits: {cpu: '200m', memory: '64Mi'}})).toEqual([])
    expect(changedResources(before.resources, {requests: {cpu: '100m', memory: '64Mi'}, limits: {cpu: '500m', memory: '128Mi'}})).toEqual(['cpu', 'memory'])
    const policy = c('a', undefined, {resizePolicy: [{resourceName: 'memory', restartPolicy: 'RestartContainer'}]})
    expect(resizeNeedsRestart(policy, ['cpu'])).toBe(false)
    expect(resizeNeedsRestart(policy, ['memory'])).toBe(true)
  })

  test("infeasible beyond allocatable, with the kubelet's message", () => {
    expect(infeasibleMessage(pod([c('a', {requests: {cpu: '3'}})]), {cpuCores: 2, memoryBytes: 2 ** 30})).toBe("Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000")
    expect(infeasibleMessage(pod([c('a', {requests: {memory: '2Gi'}})]), {cpuCores: 2, memoryBytes: 2 ** 30})).toBe(
      `Node didn't have enough capacity: memory, requested: ${2 * 2 ** 30}, capacity: ${2 ** 30}`,
    )
    expect(infeasibleMessage(pod([c('a', {requests: {cpu: '1'}})]), {cpuCores: 2, memoryBytes: 2 ** 30})).toBeUndefined()
  })

  test("the completion message is Go's JSON of the allocation (keys sorted, empty lists left out)", () => {
    expect(resizeCompletedMessage(pod([c('a', {requests: {memory: '1Mi', cpu: '1'}}), c('b')]))).toBe(
      'Pod resize completed: {"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Mi"}}},{"name":"b","resources":{}}]}',
    )
  })

  test('status resources: what runs, else the spec; empty lists left out', () => {
    expect(statusResources(undefined, {limits: {cpu: '1'}, requests: {}})).toEqual({limits: {cpu: '1'}})
    expect(statusResources({requests: {cpu: '2'}}, {requests: {cpu: '1'}})).toEqual({requests: {cpu: '2'}})
  })
})

describe('the v2 driver, on a directory laid out as a delegated cgroup2 subtree', () => {
  test('controllers enabled on the way down; weight, cpu.max, memory.max, oom.group, pids.max written; usage read', () => {
    const root = mkdtempSync(join(tmpdir(), 'cg2-'))
    try {
      writeFileSync(join(root, 'cgroup.subtree_control'), 'memory')
      const node = join(root, 'node')
      const d = new CgroupV2(node)
      // A real cgroupfs makes the interface files itself; here mkdir is plain, so the files a cgroup has are made beforehand.
      const files = ['cgroup.subtree_control', 'memory.oom.group', 'cpu.stat', 'memory.current', 'memory.stat', 'memory.events']
      const prepare = (dir: string) => {
        for (const f of files) writeFileSync(join(dir, f), '')
      }
      for (const path of ['', 'burstable', 'burstable/podu', 'burstable/podu/abc']) {
        d.create(path)
        prepare(join(node, path))
      }
      expect(readFileSync(join(root, 'cgroup.subtree_control'), 'utf8')).toBe('+cpu +pids')
      expect(readFileSync(join(node, 'burstable', 'cgroup.subtree_control'), 'utf8')).toBe('+cpu +memory +pids')
      d.apply('burstable/podu/abc', containerResources(c('a', {requests: {cpu: '100m'}, limits: {cpu: '200m', memory: '64Mi'}})), {oomGroup: true})
      const read = (f: string) => readFileSync(join(node, 'burstable/podu/abc', f), 'utf8')
      expect(read('cpu.weight')).toBe('4')
      expect(read('cpu.max')).toBe('20000 100000')
      expect(read('memory.max')).toBe(String(64 * 2 ** 20))
      expect(read('memory.oom.group')).toBe('1')
      expect(read('pids.max')).toBe('max')
      writeFileSync(join(node, 'burstable/podu/abc', 'cpu.stat'), 'usage_usec 1500\nuser_usec 1000\n')
      writeFileSync(join(node, 'burstable/podu/abc', 'memory.current'), '1000\n')
      writeFileSync(join(node, 'burstable/podu/abc', 'memory.stat'), 'anon 600\ninactive_file 300\n')
      writeFileSync(join(node, 'burstable/podu/abc', 'memory.events'), 'oom 2\noom_kill 1\n')
      expect(d.usage('burstable/podu/abc')).toEqual({cpuNanoSeconds: 1_500_000, memoryUsageBytes: 1000, workingSetBytes: 700, rssBytes: 600})
      expect(d.oomKills('burstable/podu/abc')).toBe(1)
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })
})

describe('the v1 driver', () => {
  const v1Roots = (base: (c: V1Controller) => string) => new Map((['cpu', 'cpuacct', 'memory', 'pids', 'cpuset', 'freezer'] as const).map((c) => [c, base(c)] as [V1Controller, string]))

  test('on directories: create says whether it made the cgroup; a cgroup made now gets only what differs from the kernel defaults, any other all of it; the cpuset root lets the kernel fill its children', () => {
    const root = mkdtempSync(join(tmpdir(), 'cg1-'))
    try {
      // The hierarchies' roots, where the node roots go: the host's cpuset root has cpus and mems.
      for (const c of ['cpu', 'cpuacct', 'memory', 'pids', 'cpuset', 'freezer']) mkdirSync(join(root, c))
      const d = new CgroupV1(v1Roots((c) => join(root, c, 'node')))
      writeFileSync(join(root, 'cpuset', 'cpuset.cpus'), '0-1\n')
      writeFileSync(join(root, 'cpuset', 'cpuset.mems'), '0\n')
      expect(d.create('')).toBe(true)
      // The node root copied the host's cpus and mems, and has the kernel fill in those of every cgroup below it.
      expect(readFileSync(join(root, 'cpuset', 'node', 'cpuset.cpus'), 'utf8')).toBe('0-1')
      expect(readFileSync(join(root, 'cpuset', 'node', 'cgroup.clone_children'), 'utf8')).toBe('1')
      expect(d.create('besteffort')).toBe(true)
      expect(d.create('besteffort/podu')).toBe(true)
      expect(d.create('besteffort/podu')).toBe(false)
      expect(existsSync(join(root, 'cpuset', 'node', 'besteffort', 'podu', 'cpuset.cpus'))).toBe(false)
      const podConfig = podResources(pod([c('a')]))
      d.apply('besteffort/podu', podConfig, {fresh: true})
      const files = (path: string) =>
        Object.fromEntries(
          ['cpu/cpu.shares', 'cpu/cpu.cfs_period_us', 'cpu/cpu.cfs_quota_us', 'memory/memory.limit_in_bytes', 'pids/pids.max'].flatMap((f) => {
            const [ctl, name] = f.split('/') as [string, string]
            const file = join(root, ctl, 'node', path, name)
            return existsSync(file) ? [[name, readFileSync(file, 'utf8')]] : []
          }),
        )
      // BestEffort: shares 2; the period, no quota, no memory or pids limit are what a new cgroup has.
      expect(files('besteffort/podu')).toEqual({'cpu.shares': '2'})
      d.apply('besteffort/podu', podConfig)
      expect(files('besteffort/podu')).toEqual({'cpu.shares': '2', 'cpu.cfs_period_us': '100000', 'cpu.cfs_quota_us': '-1', 'memory.limit_in_bytes': '-1', 'pids.max': 'max'})
      const limited = containerResources(c('a', {requests: {cpu: '100m'}, limits: {cpu: '200m', memory: '64Mi'}}))
      // Made with its parents (not only itself): not taken as new, everything written.
      const withParents = d.create('burstable/podv/abc')
      expect(withParents).toBe(false)
      d.apply('burstable/podv/abc', limited, {fresh: withParents})
      expect(files('burstable/podv/abc')).toEqual({'cpu.shares': '102', 'cpu.cfs_period_us': '100000', 'cpu.cfs_quota_us': '20000', 'memory.limit_in_bytes': String(64 * 2 ** 20), 'pids.max': 'max'})
      const alone = d.create('burstable/podv/def')
      expect(alone).toBe(true)
      d.apply('burstable/podv/def', limited, {fresh: alone})
      expect(files('burstable/podv/def')).toEqual({'cpu.shares': '102', 'cpu.cfs_quota_us': '20000', 'memory.limit_in_bytes': String(64 * 2 ** 20)})
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  const realV1 = process.getuid?.() === 0 && ['cpu', 'cpuacct', 'memory', 'pids', 'cpuset', 'freezer'].every((c) => existsSync(`/sys/fs/cgroup/${c}/cgroup.procs`))
  // As root on cgroup v1 (CI runs so: there it runs, and fails if it cannot).
  ;(realV1 || process.env.CI === 'true' ? test : test.skip)(
    'on the kernel: a pod and a container cgroup made below the node root have its cpus and mems, and a process placed there runs',
    async () => {
      const name = `vnode-unit-cg1-${process.pid}`
      const d = new CgroupV1(v1Roots((c) => `/sys/fs/cgroup/${c}/${name}`))
      const child = spawn('sleep', ['30'], {stdio: 'ignore'})
      try {
        d.create('')
        const path = 'besteffort/podu/abc'
        expect(d.create(path)).toBe(false) // parents made with it
        expect(d.create('besteffort/podw')).toBe(true)
        expect(d.create('besteffort/podw/def')).toBe(true)
        const host = (f: string) => readFileSync(`/sys/fs/cgroup/cpuset/${f}`, 'utf8').trim()
        for (const p of [path, 'besteffort/podw', 'besteffort/podw/def']) {
          expect(readFileSync(`/sys/fs/cgroup/cpuset/${name}/${p}/cpuset.cpus`, 'utf8').trim()).toBe(host('cpuset.cpus'))
          expect(readFileSync(`/sys/fs/cgroup/cpuset/${name}/${p}/cpuset.mems`, 'utf8').trim()).toBe(host('cpuset.mems'))
        }
        d.apply('besteffort/podw/def', containerResources(c('a', {limits: {cpu: '200m', memory: '64Mi'}})), {fresh: true})
        expect(readFileSync(`/sys/fs/cgroup/memory/${name}/besteffort/podw/def/memory.limit_in_bytes`, 'utf8').trim()).toBe(String(64 * 2 ** 20))
        await d.place('besteffort/podw/def', child.pid!)
        expect(d.procs('besteffort/podw/def')).toEqual([child.pid])
      } finally {
        child.kill('SIGKILL')
        await new Promise((r) => child.once('exit', r))
        for (let i = 0; i < 50 && d.procs('').length > 0; i++) await new Promise((r) => setTimeout(r, 20))
        d.remove('')
      }
      expect(existsSync(`/sys/fs/cgroup/cpuset/${name}`)).toBe(false)
    },
  )
})
