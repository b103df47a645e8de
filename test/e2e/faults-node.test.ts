import {afterAll, beforeAll, expect, test} from '@jest/globals'
import * as k8s from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {startComponent, stopComponent} from '../../src/cluster/controlplane.js'
import {describeE2e, runDir, startVnode, stopAllVnodes, uniqueName, vnode, waitFor} from './helpers.js'

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / 100
}

describeE2e('API server outage', () => {
  const dir = join(runDir(), 'outage-cluster')
  let core: k8s.CoreV1Api
  let coordination: k8s.CoordinationV1Api
  beforeAll(async () => {
    const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0', '--node-monitor-grace-period', '16s'], {timeout: 120_000})
    expect(up.exitCode).toBe(0)
    const kc = new k8s.KubeConfig()
    kc.loadFromFile(join(dir, 'kubeconfig'))
    core = kc.makeApiClient(k8s.CoreV1Api)
    coordination = kc.makeApiClient(k8s.CoordinationV1Api)
  })
  afterAll(async () => {
    await stopAllVnodes()
    await vnode(['cluster', 'down', '--dir', dir])
  })

  test('a 30 s outage: vnode keeps running without spinning, and the node is Ready within 15 s of the return', async () => {
    const name = uniqueName('outage')
    const p = startVnode(name, ['--kubeconfig', join(dir, 'kubeconfig')])
    await p.ready()
    await stopComponent(dir, 'kube-apiserver')
    const cpuBefore = cpuSeconds(p.pid)
    await new Promise((r) => setTimeout(r, 30_000))
    const cpuDuring = cpuSeconds(p.pid) - cpuBefore
    expect(p.child.exitCode).toBeNull()
    // Retrying with capped backoff costs next to nothing; a spinning loop would burn a core.
    expect(cpuDuring).toBeLessThan(3)
    expect(p.lines.some((l) => l.kind === 'error' && /lease renewal failed/.test(l.message))).toBe(true)

    await startComponent(dir, 'kube-apiserver')
    const back = await waitFor(async () => (await core.readNode({name})) && Date.now(), 'the API server to answer', 60_000, 200)
    await waitFor(
      async () => {
        const n = await core.readNode({name})
        const ready = n.status?.conditions?.find((c) => c.type === 'Ready')
        const lease = await coordination.readNamespacedLease({name, namespace: 'kube-node-lease'})
        return ready?.status === 'True' && new Date(lease.spec!.renewTime!).getTime() >= back - 1000
      },
      'Ready with a fresh lease after the outage',
      15_000,
      250,
    )
    expect(await p.stop()).toBe(0)
  })
})
