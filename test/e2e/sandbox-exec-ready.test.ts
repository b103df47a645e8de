import {afterAll, beforeAll, expect} from '@jest/globals'
import {KubectlFixture} from './kubectl-fixture.js'
import {existsSync} from 'node:fs'
import {describeE2e, stopAllVnodes, testWhen, waitFor} from './helpers.js'

const Pods = 10

/**
 * An exec into a sandbox that has just started (a postStart hook, the first
 * exec probes) waits until bwrap has built its root: entered earlier, it
 * fails (`nsenter: failed to execute /bin/busybox: No such file or
 * directory`) and the container is killed and restarted. A burst of starts
 * makes each setup slower.
 */
describeE2e('pod sandbox: exec hooks and probes of a burst of starting pods', () => {
  const f = new KubectlFixture('sbx-ready')

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  testWhen(existsSync('/bin/busybox'), 'the pods run /bin/busybox: apt-get install busybox-static')(
    `${Pods} pods at once, each with a postStart exec hook and exec startup, readiness and liveness probes: every hook and probe succeeds, nothing restarts`,
    async () => {
      const exec = (...command: string[]) => ({exec: {command}})
      const names = Array.from({length: Pods}, (_, i) => `burst-${i}`)
      await Promise.all(
        names.map((name) =>
          f.create({
            metadata: {name},
            spec: {
              terminationGracePeriodSeconds: 1,
              containers: [
                {
                  name: 'c',
                  image: 'busybox',
                  command: ['/bin/busybox', 'sleep', '3600'],
                  lifecycle: {postStart: exec('/bin/busybox', 'true')},
                  startupProbe: {...exec('/bin/busybox', 'true'), periodSeconds: 1},
                  readinessProbe: {...exec('/bin/busybox', 'true'), periodSeconds: 1},
                  livenessProbe: {...exec('/bin/busybox', 'true'), periodSeconds: 1},
                },
              ],
            },
          }),
        ),
      )
      await waitFor(
        async () => {
          const {items} = await f.c.core.listNamespacedPod({namespace: f.ns})
          return items.length === Pods && items.every((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
        },
        'every pod Ready',
        90_000,
        500,
      )
      // A few more probe periods for a late failure to show.
      await new Promise((r) => setTimeout(r, 3_000))
      const {items: pods} = await f.c.core.listNamespacedPod({namespace: f.ns})
      expect(pods.map((p) => [p.metadata?.name, p.status?.containerStatuses?.[0]?.restartCount]).sort()).toEqual(names.map((n) => [n, 0]).sort())
      const {items: events} = await f.c.core.listNamespacedEvent({namespace: f.ns})
      expect(events.filter((e) => e.type === 'Warning').map((e) => `${e.involvedObject.name} ${e.reason}: ${e.message}`)).toEqual([])
    },
    150_000,
  )
})
