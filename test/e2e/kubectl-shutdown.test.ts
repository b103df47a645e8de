import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, processesMatching, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/** Stopping `kubectl vnode up` cleanly terminates every pod and leaves no process behind. */
describeE2e('kubectl: a clean up exit', () => {
  const f = new KubectlFixture('kdown')

  beforeAll(async () => {
    await f.setUp(['--shutdown-grace', '5'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('SIGTERM to up: every pod terminated (Failed, Terminated, DisruptionTarget), no process left, the node NotReady and cordoned', async () => {
    const marker = uniqueName('down')
    // A plain process, one that cleans up for 500 ms on SIGTERM, one with a child in its process group.
    await f.create({metadata: {name: 'plain'}, spec: {terminationGracePeriodSeconds: 30, containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker)]}})
    await f.create({
      metadata: {name: 'cleanup'},
      spec: {terminationGracePeriodSeconds: 30, containers: [markedContainer('app', `process.on('SIGTERM', () => setTimeout(() => process.exit(1), 500)); setInterval(() => {}, 1000)`, marker)]},
    })
    await f.create({
      metadata: {name: 'parent'},
      spec: {
        terminationGracePeriodSeconds: 30,
        containers: [
          markedContainer(
            'app',
            `require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', process.argv[1] + '-child'], {stdio: 'ignore'}); setInterval(() => {}, 1000)`,
            marker,
          ),
        ],
      },
    })
    for (const name of ['plain', 'cleanup', 'parent']) await f.waitRow(name, (r) => r.status === 'Running' && r.ready === '1/1', 'Running')
    await waitFor(async () => (await processesMatching(marker)).length === 4, 'four processes', 10_000)

    const started = Date.now()
    expect(await f.node.stop('SIGTERM')).toBe(0)
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(await processesMatching(marker)).toEqual([])

    for (const name of ['plain', 'cleanup', 'parent']) {
      expect([name, await f.jsonpath(name, '{.status.phase}|{.status.reason}|{.status.message}')]).toEqual([name, 'Failed|Terminated|Pod was terminated in response to imminent node shutdown.'])
      expect(await f.jsonpath(name, '{.status.conditions[?(@.type=="DisruptionTarget")].status}/{.status.conditions[?(@.type=="DisruptionTarget")].reason}')).toBe('True/TerminationByKubelet')
      expect(await f.jsonpath(name, '{.status.containerStatuses[0].state.terminated.exitCode}')).toMatch(/^(1|143)$/)
    }
    expect(await f.jsonpath('cleanup', '{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('1')
    expect(await f.jsonpath('plain', '{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('143')
    expect(await f.row('plain')).toMatchObject({ready: '0/1', status: 'Error'})

    const node = await kubectl(['get', 'node', f.nodeName, '--no-headers'])
    expect(node.stdout).toMatch(new RegExp(`^${f.nodeName}\\s+NotReady,SchedulingDisabled\\s`))
  })
})
