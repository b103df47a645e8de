import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, stopAllVnodes} from './helpers.js'

for (const mode of ['namespaces', 'none'] as const) {
  describeE2e(`graceful node shutdown (--sandbox ${mode}): the kubelet's reason and message on every pod`, () => {
    const f = new KubectlFixture(mode === 'none' ? 'shut-plain' : 'shut-sbx')

    beforeAll(async () => {
      await f.setUp(['--sandbox', mode, '--shutdown-grace', '5'])
    })
    afterAll(async () => {
      await f.tearDown()
      await stopAllVnodes()
    })

    test('SIGTERM to up: Failed, Terminated, the shutdown message and DisruptionTarget; a pod that exits 0 on SIGTERM Succeeded without them, as the kubelet ends it', async () => {
      const trapping = (name: string, code: number, extra: Record<string, unknown> = {}) => ({
        metadata: {name},
        spec: {terminationGracePeriodSeconds: 30, ...extra, containers: [{name: 'app', image: 'busybox', command: ['sh', '-c', `trap "exit ${code}" TERM; while true; do sleep 0.2; done`]}]},
      })
      await f.create(trapping('exit0', 0))
      await f.create(trapping('exit1', 1))
      await f.create(trapping('exit1-never', 1, {restartPolicy: 'Never'}))
      await f.create({metadata: {name: 'stubborn'}, spec: {terminationGracePeriodSeconds: 2, containers: [{name: 'app', image: 'busybox', command: ['sleep', '3600']}]}})
      const names = ['exit0', 'exit1', 'exit1-never', 'stubborn']
      for (const name of names) await f.waitRow(name, (r) => r.status === 'Running' && r.ready === '1/1', 'Running')
      expect(await f.node.stop('SIGTERM', 30_000)).toBe(0)
      const got: string[] = []
      for (const name of names) got.push(`${name} ${await f.jsonpath(name, '{.status.phase}|{.status.reason}|{.status.message}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}')}`)
      const shutdown = 'Terminated|Pod was terminated in response to imminent node shutdown.|TerminationByKubelet'
      // The kubelet's statusFn makes the pod Failed/Terminated when its termination begins; its final sync
      // computes Succeeded for containers that all exited 0 and keeps the reason only when the phase stays.
      expect(got).toEqual([`exit0 Succeeded|||TerminationByKubelet`, `exit1 Failed|${shutdown}`, `exit1-never Failed|${shutdown}`, `stubborn Failed|${shutdown}`])
    })
  })
}
