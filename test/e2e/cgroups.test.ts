import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {CoreV1EventList, V1Pod} from '@kubernetes/client-node'
import {existsSync, readFileSync} from 'node:fs'
import {detectCgroups} from '../../src/emulator/runtime/cgroups/detect.js'
import {nodeRootName} from '../../src/emulator/runtime/cgroups/layout.js'
import {join} from 'node:path'
import {clients, type Clients, createNamespace, deleteNamespace, describeHolding, kubectl, processesMatching, startVnode, stopAllVnodes, uniqueName, type VnodeProcess, waitFor} from './helpers.js'
import {containerStatus, createPod, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'

/** This host's cgroups, found as vnode finds them. */
const host = detectCgroups('auto')

/** The cgroup directory of a process in a v1 hierarchy (or the v2 tree). */
function cgroupDir(pid: number, controller: string): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')
  if (host.mode === 'v2') return join('/sys/fs/cgroup', lines.find((l) => l.startsWith('0::'))!.slice(3))
  const line = lines.find((l) => l.split(':')[1]?.split(',').includes(controller))!
  return join('/sys/fs/cgroup', controller, line.split(':')[2])
}

function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(f[11]) + Number(f[12])
}

/** Every directory of a node's cgroup tree, in each hierarchy vnode uses. */
function nodeRoots(node: VnodeProcess): string[] {
  const name = nodeRootName(node.name, node.stateDir)
  if (host.mode === 'v2') return [join(host.v2Dir!, name)]
  return [...new Set(host.v1Dirs!.values())].map((d) => join(d, name))
}

async function events(c: Clients, ns: string, pod: string): Promise<CoreV1EventList['items']> {
  return (await c.core.listNamespacedEvent({namespace: ns, fieldSelector: `involvedObject.name=${pod}`})).items
}

/** Allocates 300 MiB in 10 MiB steps (touched, so resident). */
const hog = (marker: string) => `/*${marker}*/const a=[];for(let i=0;i<30;i++){a.push(Buffer.alloc(10*1024*1024,1))}console.log('allocated');setInterval(()=>{},1000)`

describeHolding(['cgroups'])('cgroups: limits enforced, OOMKilled from the kernel, usage, resize, adoption, nothing left', () => {
  let c: Clients
  let vnode: VnodeProcess
  const ns = uniqueName('cgroups')
  const node = uniqueName('cgroups')
  const tag = uniqueName('cgmark')
  const mark = (pod: string) => `${tag}-${pod}`

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    vnode = startVnode(node, ['--no-default-taint'])
    await vnode.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('the node says which cgroups it runs pods in', async () => {
    expect(host.mode).not.toBe('none')
    const n = await c.core.readNode({name: node})
    expect(n.metadata?.labels?.['vnode.dev/cgroups']).toBe(host.mode)
    for (const d of nodeRoots(vnode)) expect(existsSync(d)).toBe(true)
  })

  test('a container over its memory limit is OOMKilled (137), restartPolicy Never: the pod fails', async () => {
    await createPod(c.core, podOn(node, ns, 'oom-never', [nodeContainer('hog', hog(mark('oom-never')), {resources: {limits: {memory: '64Mi'}}})], {restartPolicy: 'Never'}))
    const p = await waitPod(c.core, ns, 'oom-never', (x) => x.status?.phase === 'Failed', 'Failed', 40_000)
    expect(containerStatus(p, 'hog')?.state?.terminated).toMatchObject({reason: 'OOMKilled', exitCode: 137})
    expect(containerStatus(p, 'hog')?.restartCount).toBe(0)
  })

  test('OOMKilled with restartPolicy Always: restarted, lastState OOMKilled, BackOff', async () => {
    await createPod(c.core, podOn(node, ns, 'oom-always', [nodeContainer('hog', hog(mark('oom-always')), {resources: {limits: {memory: '64Mi'}}})]))
    const p = await waitPod(
      c.core,
      ns,
      'oom-always',
      (x) => (containerStatus(x, 'hog')?.restartCount ?? 0) >= 1 && !!containerStatus(x, 'hog')?.lastState?.terminated,
      'restarted after an OOM kill',
      60_000,
    )
    expect(containerStatus(p, 'hog')?.lastState?.terminated).toMatchObject({reason: 'OOMKilled', exitCode: 137})
    expect(p.status?.phase).toBe('Running')
    await waitFor(async () => (await events(c, ns, 'oom-always')).some((e) => e.reason === 'BackOff' && e.type === 'Warning'), 'a BackOff event', 60_000)
    // A container under its limit is not killed: the same limit with a small program keeps running.
    await createPod(c.core, podOn(node, ns, 'small', [nodeContainer('app', `/*${mark('small')}*/setInterval(()=>{},1000)`, {resources: {limits: {memory: '64Mi'}}})]))
    await waitPod(c.core, ns, 'small', (x) => containerStatus(x, 'app')?.ready === true, 'running')
    await new Promise((r) => setTimeout(r, 2000))
    expect(containerStatus(await readPod(c.core, ns, 'small'), 'app')?.restartCount).toBe(0)
    await c.core.deleteNamespacedPod({name: 'oom-always', namespace: ns, gracePeriodSeconds: 0})
    await c.core.deleteNamespacedPod({name: 'small', namespace: ns, gracePeriodSeconds: 0})
  }, 120_000)

  test('a busy loop limited to 200m runs at 200m (within 30%) over 10 s; requests become shares; idle pods report real CPU', async () => {
    await createPod(c.core, podOn(node, ns, 'busy', [nodeContainer('loop', `/*${mark('busy')}*/for(;;){}`, {resources: {requests: {cpu: '100m'}, limits: {cpu: '200m', memory: '128Mi'}}})]))
    await createPod(c.core, podOn(node, ns, 'idle', [nodeContainer('app', `/*${mark('idle')}*/setInterval(()=>{},1000)`)]))
    await waitPod(c.core, ns, 'busy', (x) => containerStatus(x, 'loop')?.ready === true, 'running')
    await waitPod(c.core, ns, 'idle', (x) => containerStatus(x, 'app')?.ready === true, 'running')
    const [pid] = await processesMatching(mark('busy'))
    await new Promise((r) => setTimeout(r, 1000))
    const t0 = Date.now()
    const before = cpuTicks(pid)
    await new Promise((r) => setTimeout(r, 10_000))
    const cores = (cpuTicks(pid) - before) / 100 / ((Date.now() - t0) / 1000)
    expect(cores).toBeGreaterThan(0.2 * 0.7)
    expect(cores).toBeLessThan(0.2 * 1.3)
    // The kernel's view: the process is in the container's cgroup, with the kubelet's quota and shares.
    const cpu = cgroupDir(pid, 'cpu')
    if (host.mode === 'v1') {
      expect(readFileSync(join(cpu, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('20000')
      expect(readFileSync(join(cpu, 'cpu.cfs_period_us'), 'utf8').trim()).toBe('100000')
      expect(readFileSync(join(cpu, 'cpu.shares'), 'utf8').trim()).toBe('102')
      expect(readFileSync(join(cgroupDir(pid, 'memory'), 'memory.limit_in_bytes'), 'utf8').trim()).toBe(String(128 * 2 ** 20))
      // Burstable: the pod cgroup sits under the node root's burstable class.
      expect(cpu).toMatch(/\/burstable\/pod[0-9a-f-]+\/[0-9a-f]{64}$/)
    } else {
      expect(readFileSync(join(cpu, 'cpu.max'), 'utf8').trim()).toBe('20000 100000')
    }

    // Usage from the cgroups: the busy pod near its limit, the idle one small but not zero (ns precision).
    const summary = await waitFor(
      async () => {
        const r = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/stats/summary`])
        const s = JSON.parse(r.stdout) as {pods: {podRef: {name: string}; cpu: {usageNanoCores?: number; usageCoreNanoSeconds: number}; memory: {workingSetBytes: number}}[]}
        const idle = s.pods.find((p) => p.podRef.name === 'idle')
        return idle?.cpu.usageNanoCores !== undefined ? s : undefined
      },
      'rates in /stats/summary',
      30_000,
      1000,
    )
    const idle = summary.pods.find((p) => p.podRef.name === 'idle')!
    const busy = summary.pods.find((p) => p.podRef.name === 'busy')!
    expect(idle.cpu.usageCoreNanoSeconds).toBeGreaterThan(0)
    expect(idle.cpu.usageNanoCores!).toBeGreaterThan(0)
    expect(idle.memory.workingSetBytes).toBeGreaterThan(1 << 20)
    expect(busy.cpu.usageNanoCores!).toBeLessThan(0.2e9 * 1.3)
    const metrics = await kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/metrics/resource`])
    const line = metrics.stdout.split('\n').find((l) => l.startsWith('container_cpu_usage_seconds_total{') && l.includes('pod="idle"'))
    expect(Number(line!.split(' ')[1])).toBeGreaterThan(0)
    await c.core.deleteNamespacedPod({name: 'idle', namespace: ns, gracePeriodSeconds: 0})
  }, 90_000)

  test('in-place resize (kubectl patch --subresource resize) is applied to the cgroup and reported as the kubelet does', async () => {
    const busy = await readPod(c.core, ns, 'busy')
    expect(containerStatus(busy, 'loop')?.resources).toEqual({requests: {cpu: '100m', memory: '128Mi'}, limits: {cpu: '200m', memory: '128Mi'}})
    const [pid] = await processesMatching(mark('busy'))
    // kubectl exec runs in the container's cgroup too.
    const ex = await kubectl(['exec', '-n', ns, 'busy', '--', '/bin/sh', '-c', 'sleep 0.5; cat /proc/self/cgroup'])
    expect(ex.stdout).toContain(containerStatus(busy, 'loop')!.containerID!.replace('vnode://', ''))
    const patch = JSON.stringify({spec: {containers: [{name: 'loop', resources: {requests: {cpu: '200m'}, limits: {cpu: '500m', memory: '128Mi'}}}]}})
    const r = await kubectl(['patch', 'pod', 'busy', '-n', ns, '--subresource', 'resize', '--type', 'strategic', '-p', patch])
    expect(r.stderr).toBe('')
    const p = await waitPod(c.core, ns, 'busy', (x) => containerStatus(x, 'loop')?.resources?.limits?.cpu === '500m', 'the new limit in the status')
    expect(containerStatus(p, 'loop')).toMatchObject({restartCount: 0, allocatedResources: {cpu: '200m', memory: '128Mi'}, resources: {requests: {cpu: '200m'}, limits: {cpu: '500m'}}})
    expect(p.status?.conditions?.some((x) => x.type === 'PodResizePending' || x.type === 'PodResizeInProgress')).toBe(false)
    expect((await processesMatching(mark('busy'))).includes(pid)).toBe(true)
    const cpu = cgroupDir(pid, 'cpu')
    if (host.mode === 'v1') {
      expect(readFileSync(join(cpu, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('50000')
      expect(readFileSync(join(cpu, 'cpu.shares'), 'utf8').trim()).toBe('204')
    } else expect(readFileSync(join(cpu, 'cpu.max'), 'utf8').trim()).toBe('50000 100000')
    const ev = await waitFor(async () => (await events(c, ns, 'busy')).find((e) => e.reason === 'ResizeCompleted'), 'ResizeCompleted')
    expect(ev.message).toBe('Pod resize completed: {"containers":[{"name":"loop","resources":{"limits":{"cpu":"500m","memory":"128Mi"},"requests":{"cpu":"200m","memory":"128Mi"}}}]}')

    // More than the node has: Infeasible, nothing applied.
    const big = JSON.stringify({spec: {containers: [{name: 'loop', resources: {requests: {cpu: '1000'}, limits: {cpu: '2000', memory: '128Mi'}}}]}})
    expect((await kubectl(['patch', 'pod', 'busy', '-n', ns, '--subresource', 'resize', '--type', 'strategic', '-p', big])).exitCode).toBe(0)
    const pending = await waitPod(c.core, ns, 'busy', (x) => !!x.status?.conditions?.some((k) => k.type === 'PodResizePending'), 'PodResizePending')
    const cond = pending.status!.conditions!.find((k) => k.type === 'PodResizePending')!
    expect(cond).toMatchObject({status: 'True', reason: 'Infeasible'})
    expect(cond.message).toMatch(/^Node didn't have enough capacity: cpu, requested: 1000000, capacity: \d+$/)
    if (host.mode === 'v1') expect(readFileSync(join(cpu, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('50000')
    expect(containerStatus(pending, 'loop')?.resources?.limits?.cpu).toBe('500m')
    // The node still holds what it allocated, not what the spec asks: a pod that fits beside 200m is admitted.
    await createPod(c.core, podOn(node, ns, 'beside', [nodeContainer('app', `/*${mark('beside')}*/setInterval(()=>{},1000)`, {resources: {requests: {cpu: '500m'}}})]))
    await waitPod(c.core, ns, 'beside', (x) => containerStatus(x, 'app')?.ready === true, 'admitted and running')
    for (const name of ['busy', 'beside']) await c.core.deleteNamespacedPod({name, namespace: ns, gracePeriodSeconds: 0})
    for (const name of ['busy', 'beside']) await waitFor(async () => !(await readPod(c.core, ns, name)), `${name} gone`)
  }, 60_000)

  test('a resize of a resource whose resizePolicy is RestartContainer restarts the container with the new limit', async () => {
    const policy = [
      {resourceName: 'memory', restartPolicy: 'RestartContainer'},
      {resourceName: 'cpu', restartPolicy: 'NotRequired'},
    ]
    await createPod(
      c.core,
      podOn(node, ns, 'restart', [nodeContainer('app', `/*${mark('restart')}*/setInterval(()=>{},1000)`, {resizePolicy: policy, resources: {requests: {memory: '100Mi'}, limits: {memory: '128Mi'}}})]),
    )
    await waitPod(c.core, ns, 'restart', (x) => containerStatus(x, 'app')?.ready === true, 'running')
    const patch = JSON.stringify({spec: {containers: [{name: 'app', resources: {requests: {memory: '100Mi'}, limits: {memory: '256Mi'}}}]}})
    expect((await kubectl(['patch', 'pod', 'restart', '-n', ns, '--subresource', 'resize', '--type', 'strategic', '-p', patch])).exitCode).toBe(0)
    const p = await waitPod(c.core, ns, 'restart', (x) => containerStatus(x, 'app')?.restartCount === 1 && containerStatus(x, 'app')?.ready === true, 'restarted')
    expect(containerStatus(p, 'app')?.resources?.limits?.memory).toBe('256Mi')
    const [pid] = await processesMatching(mark('restart'))
    if (host.mode === 'v1') expect(readFileSync(join(cgroupDir(pid, 'memory'), 'memory.limit_in_bytes'), 'utf8').trim()).toBe(String(256 * 2 ** 20))
    expect((await events(c, ns, 'restart')).some((e) => e.reason === 'Killing' && e.message === 'Container app resize requires restart')).toBe(true)
    await c.core.deleteNamespacedPod({name: 'restart', namespace: ns, gracePeriodSeconds: 0})
  }, 60_000)

  test('stopping a container kills its whole cgroup; after SIGKILL of vnode, adoption finds the processes by cgroup; nothing left after stop', async () => {
    // The main process starts a child in a session of its own: outside the process group, inside the cgroup.
    // The child's marker is assembled at run time, so the parent's command line does not match it.
    const escaper = `/*${mark('runaway')}*/require('child_process').spawn(process.execPath,['-e','/*'+${JSON.stringify(tag)}+'-escaped*/setInterval(()=>{},1000)'],{detached:true,stdio:'ignore'}).unref();setInterval(()=>{},1000)`
    await createPod(c.core, podOn(node, ns, 'escape', [nodeContainer('app', escaper, {resources: {limits: {memory: '256Mi', cpu: '500m'}}})]))
    await createPod(c.core, podOn(node, ns, 'keep', [nodeContainer('app', `/*${mark('keep')}*/setInterval(()=>{},1000)`, {resources: {limits: {memory: '256Mi', cpu: '500m'}}})]))
    const before: V1Pod = await waitPod(c.core, ns, 'keep', (x) => containerStatus(x, 'app')?.ready === true, 'running')
    await waitPod(c.core, ns, 'escape', (x) => containerStatus(x, 'app')?.ready === true, 'running')
    const escaped = await waitFor(async () => {
      const p = await processesMatching(mark('escaped'))
      return p.length === 1 ? p : undefined
    }, 'the escaped child')
    const [keepPid] = await processesMatching(mark('keep'))
    expect(readFileSync(`/proc/${escaped[0]}/cgroup`, 'utf8')).toContain(`pod${(await readPod(c.core, ns, 'escape'))!.metadata!.uid}`)

    // vnode dies; the pods keep running; a restarted vnode adopts them from their cgroups.
    expect(await vnode.stop('SIGKILL')).not.toBe(0)
    expect(await processesMatching(mark('keep'))).toEqual([keepPid])
    vnode = startVnode(node, ['--no-default-taint'])
    await vnode.ready()
    const after = await waitPod(c.core, ns, 'keep', (x) => containerStatus(x, 'app')?.ready === true && x.status?.phase === 'Running', 'ready after adoption')
    expect(containerStatus(after, 'app')?.containerID).toBe(containerStatus(before, 'app')?.containerID)
    expect(containerStatus(after, 'app')?.restartCount).toBe(0)
    expect(await processesMatching(mark('keep'))).toEqual([keepPid])

    // Deleting the pod ends the escaped child too: it was in the container's cgroup.
    await c.core.deleteNamespacedPod({name: 'escape', namespace: ns})
    await waitFor(async () => (await processesMatching(mark('escaped'))).length === 0, 'the escaped child killed', 20_000)
    await waitFor(async () => !(await readPod(c.core, ns, 'escape')), 'the pod gone', 20_000)

    // The node stops: no process and no cgroup of its tree is left.
    const roots = nodeRoots(vnode)
    expect(await vnode.stop()).toBe(0)
    for (const m of ['restart', 'keep', 'runaway', 'escaped', 'busy', 'beside', 'idle', 'oom-always', 'oom-never', 'small']) expect(await processesMatching(mark(m))).toEqual([])
    for (const d of roots) expect(existsSync(d)).toBe(false)
  }, 120_000)

  test('a fork bomb is bounded by --pod-max-pids (pids.max of the pod cgroup)', async () => {
    const bounded = uniqueName('pids')
    const v = startVnode(bounded, ['--no-default-taint', '--pod-max-pids', '40'])
    try {
      await v.ready()
      const bomb = `/*${mark('bomb')}*/const {spawn}=require('child_process');let ok=0,failed=0;for(let i=0;i<100;i++){try{const c=spawn('/bin/sleep',['30'],{stdio:'ignore'});c.on('spawn',()=>ok++);c.on('error',()=>failed++)}catch{failed++}}setTimeout(()=>console.log('spawned '+ok+' failed '+failed),3000);setInterval(()=>{},1000)`
      await createPod(c.core, podOn(bounded, ns, 'bomb', [nodeContainer('app', bomb)]))
      const line = await waitFor(async () => /spawned (\d+) failed (\d+)/.exec((await kubectl(['logs', '-n', ns, 'bomb'])).stdout) ?? undefined, "the bomb's count", 30_000, 500)
      // The main process (node with its threads counts as tasks) and its children stay within 40 tasks.
      expect(Number(line[1])).toBeLessThan(40)
      expect(Number(line[2])).toBeGreaterThan(60)
      await c.core.deleteNamespacedPod({name: 'bomb', namespace: ns, gracePeriodSeconds: 0})
      await waitFor(async () => !(await readPod(c.core, ns, 'bomb')), 'the bomb gone', 20_000)
    } finally {
      await v.stop()
      await kubectl(['delete', 'node', bounded, '--ignore-not-found'])
    }
  }, 60_000)

  test('plain mode (--cgroups none): the node says so, and a pod with limits gets a Warning', async () => {
    const plain = uniqueName('plain')
    const v = startVnode(plain, ['--no-default-taint', '--cgroups', 'none'])
    try {
      await v.ready()
      expect((await c.core.readNode({name: plain})).metadata?.labels?.['vnode.dev/cgroups']).toBe('none')
      await createPod(c.core, podOn(plain, ns, 'limited', [nodeContainer('app', `/*${mark('plain')}*/setInterval(()=>{},1000)`, {resources: {limits: {memory: '64Mi'}}})]))
      const ev = await waitFor(async () => (await events(c, ns, 'limited')).find((e) => e.reason === 'LimitsNotEnforced'), 'the LimitsNotEnforced warning')
      expect(ev.type).toBe('Warning')
      expect(ev.message).toBe('Resource limits of this pod are not enforced: cgroups were turned off (--cgroups none)')
      for (const d of nodeRoots(v)) expect(existsSync(d)).toBe(false)
      await c.core.deleteNamespacedPod({name: 'limited', namespace: ns, gracePeriodSeconds: 0})
    } finally {
      await v.stop()
      await kubectl(['delete', 'node', plain, '--ignore-not-found'])
    }
  }, 60_000)
})
