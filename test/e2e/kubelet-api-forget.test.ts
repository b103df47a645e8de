import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1PodList} from '@kubernetes/client-node'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, waitFor} from './helpers.js'

/**
 * virtual-kubelet's TestPodLifecycleGracefulDelete, through the API
 * server's node proxy: a second after a graceful delete began, a pod whose
 * program ends on SIGTERM is no longer among the kubelet API's running
 * pods, and once its object is gone the pod manager (GET /pods) has
 * forgotten it.
 */
for (const mode of ['namespaces', 'none'] as const) {
  describeE2e(`kubelet API after a graceful delete (--sandbox ${mode})`, () => {
    const f = new KubectlFixture(mode === 'none' ? 'kapi-plain' : 'kapi-sbx')

    beforeAll(async () => {
      await f.setUp(['--sandbox', mode])
    })
    afterAll(async () => {
      await f.tearDown()
      await stopAllVnodes()
    })

    const listed = async (path: string, name: string) => {
      const r = await kubectl(['get', '--raw', `/api/v1/nodes/${f.nodeName}/proxy/${path}`])
      expect(r.exitCode).toBe(0)
      return (JSON.parse(r.stdout) as V1PodList).items.some((p) => p.metadata?.namespace === f.ns && p.metadata?.name === name)
    }

    test('a program that ends on SIGTERM: not running a second after the delete began, not in /pods once its object is gone', async () => {
      await f.create({metadata: {name: 'graceful'}, spec: {containers: [{name: 'c', image: 'busybox', command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done']}]}})
      await f.waitRow('graceful', (r) => r.status === 'Running' && r.ready === '1/1', 'Running')
      expect(await listed('runningpods/', 'graceful')).toBe(true)
      expect(await listed('pods', 'graceful')).toBe(true)
      expect((await kubectl(['delete', 'pod', 'graceful', '-n', f.ns, '--wait=false'])).exitCode).toBe(0)
      await new Promise((r) => setTimeout(r, 1_000))
      expect(await listed('runningpods/', 'graceful')).toBe(false)
      await waitFor(async () => (await kubectl(['get', 'pod', 'graceful', '-n', f.ns])).exitCode !== 0, 'the pod object gone', 20_000, 100)
      expect(await listed('pods', 'graceful')).toBe(false)
    })

    if (mode === 'namespaces')
      test('a PID 1 without a SIGTERM handler (plain sleep) still runs a second after the delete began, as under a kubelet: its grace period is not over', async () => {
        await f.create({metadata: {name: 'sleeper'}, spec: {containers: [{name: 'c', image: 'busybox', command: ['sleep', '3600']}]}})
        await f.waitRow('sleeper', (r) => r.status === 'Running' && r.ready === '1/1', 'Running')
        expect((await kubectl(['delete', 'pod', 'sleeper', '-n', f.ns, '--wait=false'])).exitCode).toBe(0)
        await new Promise((r) => setTimeout(r, 1_000))
        expect(await listed('runningpods/', 'sleeper')).toBe(true)
        expect((await kubectl(['delete', 'pod', 'sleeper', '-n', f.ns, '--force', '--grace-period=0'])).exitCode).toBe(0)
        await waitFor(async () => !(await listed('pods', 'sleeper')), 'sleeper forgotten by /pods', 5_000, 100)
      })
  })
}
