import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, NODE, markedContainer} from './kubectl-fixture.js'
import {describeE2e, stopAllVnodes, uniqueName, type VnodeLine, waitFor} from './helpers.js'

interface PodLine extends VnodeLine {
  namespace: string
  name: string
  ready: string
  status: string
  restarts: string
}

/** `up --no-tui -o json`: one line per pod change, with the columns kubectl and the dashboard show. */
describeE2e('up without the dashboard: a line per pod change', () => {
  const f = new KubectlFixture('lines')
  beforeAll(async () => {
    await f.setUp(['--shutdown-grace', '2'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  const podLines = (name: string) => f.node.lines.filter((l): l is PodLine => l.kind === 'pod' && (l as PodLine).name === name && (l as PodLine).namespace === f.ns)
  const waitPodLine = (name: string, pred: (l: PodLine) => boolean, what: string, timeoutMs = 30_000) =>
    waitFor(
      () => podLines(name).find(pred),
      () => `${name}: ${what} (pod lines so far: ${JSON.stringify(podLines(name).map((l) => l.message))})`,
      timeoutMs,
      100,
    )

  test('a readiness flip, a restart and a crash loop each print one line; lines match kubectl get pod; the summary is last', async () => {
    const marker = uniqueName('lines')
    const flag = f.out('ready-now')
    await f.create({
      metadata: {name: 'flip'},
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            ...markedContainer('app', 'setInterval(() => {}, 1000)', marker),
            readinessProbe: {exec: {command: [NODE, '-e', `process.exit(require('fs').existsSync(${JSON.stringify(flag)}) ? 0 : 1)`]}, periodSeconds: 1, failureThreshold: 1},
          },
        ],
      },
    })
    await f.create({metadata: {name: 'crash'}, spec: {terminationGracePeriodSeconds: 1, containers: [markedContainer('app', 'setTimeout(() => process.exit(3), 1500)', marker)]}})

    const notReady = await waitPodLine('flip', (l) => l.ready === '0/1' && l.status === 'Running', 'running, not ready')
    expect(notReady).toMatchObject({namespace: f.ns, name: 'flip', restarts: '0', message: `${f.ns}/flip 0/1 Running 0`})
    const {writeFileSync} = await import('node:fs')
    writeFileSync(flag, '')
    const nowReady = await waitPodLine('flip', (l) => l.ready === '1/1', 'ready')
    expect(nowReady).toMatchObject({status: 'Running', restarts: '0', message: `${f.ns}/flip 1/1 Running 0`})
    // What kubectl prints for the pod now is what the last line said.
    expect(await f.row('flip')).toMatchObject({ready: '1/1', status: 'Running', restarts: 0})

    await waitPodLine('crash', (l) => l.status === 'Running' && l.restarts === '0', 'running')
    const restarted = await waitPodLine('crash', (l) => /^1 \(\d+s ago\)$/.test(l.restarts), 'one restart')
    expect(restarted.message).toBe(`${f.ns}/crash ${restarted.ready} ${restarted.status} ${restarted.restarts}`)
    // After the second exit, CrashLoopBackOff shows only from the sync that restarts the container (the kubelet's too:
    // the sync that found it in back-off comes 10-15 s later, when its 10 s are over), until the relist that sees the
    // restart, which may come before the status is written (status writes coalesce for 100 ms): the line may be
    // overtaken there. After the third, the 20 s back-off outlasts that sync, and the status shows it for seconds.
    await waitPodLine('crash', (l) => l.status === 'CrashLoopBackOff' && l.ready === '0/1', 'CrashLoopBackOff after the second or third exit', 60_000)

    // One line per change: never the same READY, STATUS and restart count twice in a row for a pod.
    for (const name of ['flip', 'crash']) {
      const keys = podLines(name).map((l) => `${l.ready} ${l.status} ${Number.parseInt(l.restarts, 10)}`)
      expect(keys.filter((k, i) => i > 0 && k === keys[i - 1])).toEqual([])
    }

    expect(await f.node.stop('SIGTERM')).toBe(0)
    // The shutdown shows as pod lines too, and the summary object ends the output.
    expect(podLines('flip').at(-1)).toMatchObject({ready: '0/1', status: 'Error'})
    const last = f.node.lines.at(-1)
    expect(last?.kind).toBe('stopped')
    expect(last?.summary).toMatchObject({requests: expect.any(Number), requestsSinceReady: expect.any(Number)})
    await f.noProcess(marker)
  })
})
