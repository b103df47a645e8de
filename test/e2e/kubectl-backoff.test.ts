import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/**
 * `up --crash-loop-backoff INITIAL:MAX`: a restarting container's back-off
 * of the user's choosing. With the kubelet's 10s:5m, a container that exits
 * at once restarts for the fourth time after 0 + 10 + 20 + 40 s; with 1s:2s
 * it does within seconds, and its CrashLoopBackOff message names the cap.
 */
describeE2e('kubectl: up --crash-loop-backoff sets the restart back-off', () => {
  const f = new KubectlFixture('kbo')
  beforeAll(async () => {
    await f.setUp(['--crash-loop-backoff', '1s:2s'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('1s:2s: four restarts within 20 s, and CrashLoopBackOff says back-off 2s once the delay reaches the cap', async () => {
    const marker = uniqueName('bo')
    await f.create({metadata: {name: 'crash'}, spec: {terminationGracePeriodSeconds: 1, containers: [markedContainer('app', `process.exit(3)`, marker)]}})
    const created = Date.now()
    await f.waitRow('crash', (r) => r.restarts >= 4, 'RESTARTS 4', 20_000)
    // The kubelet's back-off would have taken at least 70 s to get here.
    expect(Date.now() - created).toBeLessThan(20_000)
    const uid = (await f.json('crash')).metadata!.uid
    const message = await waitFor(
      async () => {
        const cs = (await f.json('crash')).status?.containerStatuses?.[0]
        return cs?.state?.waiting?.reason === 'CrashLoopBackOff' && cs.restartCount! >= 4 ? cs.state.waiting.message : undefined
      },
      'CrashLoopBackOff after the fourth restart',
      20_000,
      100,
    )
    expect(message).toBe(`back-off 2s restarting failed container=app pod=crash_${f.ns}(${uid})`)
    await kubectl(['delete', 'pod', 'crash', '-n', f.ns, '--wait=false'])
    await f.gone('crash')
    await f.noProcess(marker)
  })
})
