import {afterAll, beforeAll, expect, test} from '@jest/globals'
import * as k8s from '@kubernetes/client-node'
import {join} from 'node:path'
import {startComponent, stopComponent} from '../../src/cluster/controlplane.js'
import {createNamespace, describeE2e, processesMatching, runDir, startVnode, stopAllVnodes, uniqueName, vnode, waitFor} from './helpers.js'
import {containerStatus, createPod, eventsOnceSeen, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'

describeE2e('API server faults: pods through a 30 s outage, watch expiry and dropped connections', () => {
  const dir = join(runDir(), 'api-faults-cluster')
  const kubeconfig = join(dir, 'kubeconfig')
  let core: k8s.CoreV1Api
  const ns = uniqueName('apifault')
  const node = uniqueName('apifault')
  const tag = uniqueName('apimark')
  const mark = (pod: string) => `${tag}-${pod}`

  beforeAll(async () => {
    const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0'], {timeout: 120_000})
    expect(up.exitCode).toBe(0)
    const kc = new k8s.KubeConfig()
    kc.loadFromFile(kubeconfig)
    core = kc.makeApiClient(k8s.CoreV1Api)
    await createNamespace(core, ns)
  })
  afterAll(async () => {
    await stopAllVnodes()
    await vnode(['cluster', 'down', '--dir', dir])
  })

  test('nothing restarts during the outage; status converges after it; a pod deleted and one created while the watch is broken are killed and started once', async () => {
    const p = startVnode(node, ['--kubeconfig', kubeconfig, '--no-default-taint'])
    await p.ready()
    const sleeper = (name: string) => podOn(node, ns, name, [nodeContainer('app', `/*${mark(name)}*/setInterval(()=>{},1000)`)])
    await createPod(core, sleeper('steady'))
    await createPod(core, sleeper('victim'))
    // Finishes while the API server is away: its status can only be written after.
    await createPod(core, podOn(node, ns, 'finisher', [nodeContainer('app', `/*${mark('finisher')}*/setTimeout(()=>{},8000)`)], {restartPolicy: 'Never'}))
    for (const name of ['steady', 'victim', 'finisher']) await waitPod(core, ns, name, (x) => !!containerStatus(x, 'app')?.state?.running, 'running')
    const steadyPids = await processesMatching(mark('steady'))
    const victimPids = await processesMatching(mark('victim'))
    expect(steadyPids).toHaveLength(1)
    expect(victimPids).toHaveLength(1)

    await stopComponent(dir, 'kube-apiserver')
    await new Promise((r) => setTimeout(r, 30_000))
    expect(p.child.exitCode).toBeNull()
    expect(await processesMatching(mark('steady'))).toEqual(steadyPids)
    expect(await processesMatching(mark('finisher'))).toEqual([])
    await startComponent(dir, 'kube-apiserver')
    await waitFor(() => core.readNamespace({name: ns}), 'the API server back', 60_000, 200)

    // While vnode's watch is still broken (it reconnects with backoff, and its
    // resourceVersion predates the restarted server's watch cache: 410 Gone, relist).
    await core.deleteNamespacedPod({name: 'victim', namespace: ns})
    await createPod(core, sleeper('born'))

    await waitPod(core, ns, 'finisher', (x) => x.status?.phase === 'Succeeded', 'Succeeded after the outage', 30_000)
    await waitFor(async () => !(await readPod(core, ns, 'victim')), 'victim deleted (vnode confirmed the termination)', 30_000)
    expect(await processesMatching(mark('victim'))).toEqual([])
    const born = await waitPod(core, ns, 'born', (x) => !!containerStatus(x, 'app')?.state?.running, 'running', 30_000)
    expect(containerStatus(born, 'app')!.restartCount).toBe(0)
    expect(await processesMatching(mark('born'))).toHaveLength(1)

    // Nothing was restarted: same process, restartCount 0, no second Started.
    const steady = await readPod(core, ns, 'steady')
    expect(containerStatus(steady, 'app')!.restartCount).toBe(0)
    expect(await processesMatching(mark('steady'))).toEqual(steadyPids)
    const events = await eventsOnceSeen(core, ns, 'born', 'Started')
    const started = (pod: string) => events.filter((e) => e.involvedObject.name === pod && e.reason === 'Started').reduce((n, e) => n + (e.count ?? 1), 0)
    expect(started('steady')).toBe(1)
    expect(started('born')).toBe(1)
    expect(events.some((e) => e.involvedObject.name === 'steady' && e.reason === 'Killing')).toBe(false)

    // The watches were re-established, not piled up: node, pods and services.
    const before = p.lines.filter((l) => l.kind === 'stats').length
    p.child.kill('SIGUSR2')
    const stats = await p.waitForLine((l) => l.kind === 'stats' && p.lines.filter((x) => x.kind === 'stats').length > before, 'stats line')
    expect((stats.summary as {openWatches: number}).openWatches).toBe(3)

    expect(await p.stop()).toBe(0)
    for (const name of ['steady', 'born', 'victim']) expect(await processesMatching(mark(name))).toEqual([])
  })
})
