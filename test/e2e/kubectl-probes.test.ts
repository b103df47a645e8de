import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {writeFileSync} from 'node:fs'
import {KubectlFixture, markedContainer, parseRow} from './kubectl-fixture.js'
import {describeE2e, kubectl, serverPort, stopAllVnodes, uniqueName} from './helpers.js'

/** Serves /healthz on argv[2] after 2 s: 200, or 503 once the file argv[3] exists. */
const lateServer = `const fs = require('fs'); setTimeout(() => require('http').createServer((q, s) => { s.statusCode = fs.existsSync(process.argv[3]) ? 503 : 200; s.end('ok') }).listen(Number(process.argv[2]), '127.0.0.1'), 2000)`

describeE2e('kubectl: probes', () => {
  const f = new KubectlFixture('kprobe')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('a readiness probe drives READY 0/1 -> 1/1 -> 0/1 without a restart', async () => {
    const marker = uniqueName('ready')
    const port = await serverPort()
    const unready = f.out('unready')
    const w = f.watch('ready')
    await f.create({
      metadata: {name: 'ready'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          markedContainer('app', lateServer, marker, {
            args: [String(port), unready],
            readinessProbe: {httpGet: {path: '/healthz', port}, periodSeconds: 1, failureThreshold: 1},
          }),
        ],
      },
    })
    const notReady = parseRow(await w.waitLine((l) => parseRow(l)?.status === 'Running', 'Running'))!
    expect(notReady).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('ready', '{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}')).toBe('False/ContainersNotReady')
    const ready = parseRow(await w.waitLine((l) => parseRow(l)?.ready === '1/1', 'READY 1/1', 20_000))!
    expect(ready).toMatchObject({status: 'Running', restarts: 0})
    expect(await f.jsonpath('ready', '{.status.conditions[?(@.type=="Ready")].status}/{.status.containerStatuses[0].ready}')).toBe('True/true')

    writeFileSync(unready, '')
    const again = await f.waitRow('ready', (r) => r.ready === '0/1', 'READY 0/1 again', 15_000)
    expect(again).toMatchObject({status: 'Running', restarts: 0})
    await f.waitDescribe('ready', /Warning\s+Unhealthy\s+.*Readiness probe failed: HTTP probe failed with statuscode: 503/)
    w.stop()
    await kubectl(['delete', 'pod', 'ready', '-n', f.ns, '--wait=false'])
    await f.gone('ready')
    await f.noProcess(marker)
  })

  test('a failing liveness probe restarts the container: Killing event, RESTARTS, lastState exit 143', async () => {
    const marker = uniqueName('live')
    const port = await serverPort()
    await f.create({
      metadata: {name: 'live'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker, {livenessProbe: {tcpSocket: {port}, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 1}})],
      },
    })
    const row = await f.waitRow('live', (r) => r.restarts >= 1, 'a restart', 20_000)
    expect(row.ready).toMatch(/^[01]\/1$/)
    expect(await f.jsonpath('live', '{.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.containerStatuses[0].lastState.terminated.reason}')).toBe('143/Error')
    const described = await f.waitDescribe('live', /Normal\s+Killing\s+.*Container app failed liveness probe, will be restarted/)
    expect(described).toMatch(new RegExp(`Warning\\s+Unhealthy\\s+.*Liveness probe failed: dial tcp 127\\.0\\.0\\.1:${port}: connect: connection refused`))
    await kubectl(['delete', 'pod', 'live', '-n', f.ns, '--wait=false'])
    await f.gone('live')
    await f.noProcess(marker)
  })

  test("a container its liveness probe kills restarts in the same step, as the kubelet's: twice at once, then CrashLoopBackOff", async () => {
    const marker = uniqueName('relive')
    const port = await serverPort()
    const w = f.watch('relive')
    await f.create({
      metadata: {name: 'relive'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker, {livenessProbe: {tcpSocket: {port}, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 1}})],
      },
    })
    const backOff = parseRow(await w.waitLine((l) => parseRow(l)?.status === 'CrashLoopBackOff', 'CrashLoopBackOff', 60_000))!
    // Each kill's restart is judged from the exit before it: the first has none, the second's began the 10 s back-off, still running at the third.
    expect(backOff.restarts).toBe(2)
    const rows = w.lines.map((l) => parseRow(l)).filter((r) => r !== undefined)
    const upToBackOff = rows.slice(
      0,
      rows.findIndex((r) => r.status === 'CrashLoopBackOff'),
    )
    // The killed instances are never shown ended: each kill's status is the running one's, until the next runs.
    expect(upToBackOff.map((r) => r.status).filter((s) => s !== 'Pending' && s !== 'ContainerCreating' && s !== 'Running')).toEqual([])
    expect(upToBackOff.some((r) => r.restarts === 2 && r.status === 'Running')).toBe(true)
    w.stop()
    await kubectl(['delete', 'pod', 'relive', '-n', f.ns, '--wait=false'])
    await f.gone('relive')
    await f.noProcess(marker)
  })
})
