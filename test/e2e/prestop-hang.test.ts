import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {readStat} from '../../src/emulator/runtime/process/proc.js'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, podProcesses, stopAllVnodes, waitFor} from './helpers.js'

/** A container and a preStop hook that both sleep for an hour: only the grace period can end them. */
function hung(name: string): V1Pod {
  return {
    metadata: {name},
    spec: {
      terminationGracePeriodSeconds: 3,
      containers: [{name: 'app', image: 'busybox', command: ['sleep', '3600'], lifecycle: {preStop: {exec: {command: ['sleep', '3600']}}}}],
    },
  }
}

function listed(pid: number): string {
  return podProcesses(pid)
    .map((d) => `${d.pid} ${d.comm}`)
    .join(', ')
}

for (const mode of ['namespaces', 'none'] as const) {
  describeE2e(`a preStop hook that never ends (--sandbox ${mode}): the grace period ends it and its container`, () => {
    const f = new KubectlFixture(mode === 'none' ? 'hang-plain' : 'hang-sbx')

    beforeAll(async () => {
      await f.setUp(['--sandbox', mode, '--shutdown-grace', '10'])
    })
    afterAll(async () => {
      await f.tearDown()
      await stopAllVnodes()
    })

    const running = (name: string) => f.waitRow(name, (r) => r.status === 'Running' && r.ready === '1/1', 'Running 1/1')
    /** The container's sleep and the hook's: the hook runs. */
    const hookRuns = () =>
      waitFor(
        () => podProcesses(f.node.pid).filter((d) => d.comm === 'sleep').length >= 2,
        () => `the hook's sleep beside the container's (have ${listed(f.node.pid)})`,
        15_000,
        100,
      )
    const nothingLeft = (timeoutMs: number) =>
      waitFor(
        () => podProcesses(f.node.pid).length === 0,
        () => `no process left under vnode (have ${listed(f.node.pid)})`,
        timeoutMs,
        100,
      )

    /** The pod's events of this reason, as kubectl lists them: "type reason message" lines. */
    const events = async (pod: string, reason: string) => {
      const r = await kubectl([
        'get',
        'events',
        '-n',
        f.ns,
        '--field-selector',
        `involvedObject.name=${pod},reason=${reason}`,
        '-o',
        'jsonpath={range .items[*]}{.type} {.reason} {.message}{"\\n"}{end}',
      ])
      return r.stdout.split('\n').filter(Boolean)
    }

    test('kubectl delete: the hook has the 3 s grace, the container 2 s more, then both are killed and the pod is gone; the cut-short hook is a FailedPreStopHook event', async () => {
      await f.create(hung('delete'))
      await running('delete')
      const started = Date.now()
      const del = await kubectl(['delete', 'pod', 'delete', '-n', f.ns, '--timeout=40s'])
      const elapsed = Date.now() - started
      expect(del).toMatchObject({exitCode: 0})
      // The kubelet: the hook within the grace (3 s), then at least minimumGracePeriodInSeconds (2 s) after SIGTERM.
      expect(elapsed).toBeGreaterThanOrEqual(2_500)
      expect(elapsed).toBeLessThan(15_000)
      await nothingLeft(5_000)
      // The kubelet records the hook its grace cut short, as it records one that failed.
      await waitFor(async () => (await events('delete', 'FailedPreStopHook')).length === 1, 'one FailedPreStopHook event', 10_000, 250)
      expect(await events('delete', 'FailedPreStopHook')).toEqual(['Warning FailedPreStopHook PreStopHook failed'])
    })

    test('a force delete while the hook runs: the container and the hook are killed, the hook recorded as FailedPreStopHook', async () => {
      await f.create(hung('force'))
      await running('force')
      expect((await kubectl(['delete', 'pod', 'force', '-n', f.ns, '--wait=false'])).exitCode).toBe(0)
      await hookRuns()
      expect((await kubectl(['delete', 'pod', 'force', '-n', f.ns, '--force', '--grace-period=0'])).exitCode).toBe(0)
      await nothingLeft(10_000)
      await waitFor(async () => (await events('force', 'FailedPreStopHook')).length === 1, 'one FailedPreStopHook event', 10_000, 250)
      expect(await events('force', 'FailedPreStopHook')).toEqual(['Warning FailedPreStopHook PreStopHook failed'])
    })

    test('node shutdown while the hook runs: every pod terminated in time, up exits 0, no process of the pod left', async () => {
      await f.create(hung('shutdown'))
      await running('shutdown')
      expect((await kubectl(['delete', 'pod', 'shutdown', '-n', f.ns, '--wait=false'])).exitCode).toBe(0)
      await hookRuns()
      const left = podProcesses(f.node.pid)
      expect(await f.node.stop('SIGTERM', 30_000)).toBe(0)
      expect(f.node.lines.filter((l) => /did not terminate in time/.test(l.message))).toEqual([])
      // up is gone, so nothing is its descendant any more: each process it had must be gone too (or its pid reused).
      await waitFor(
        () => left.every((p) => readStat(p.pid)?.startTime !== p.startTime),
        () => `the pod's processes to be gone (still: ${left.filter((p) => readStat(p.pid)?.startTime === p.startTime).map((p) => `${p.pid} ${p.comm}`)})`,
        5_000,
        100,
      )
    })
  })
}
