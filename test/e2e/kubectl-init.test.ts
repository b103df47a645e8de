import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync} from 'node:fs'
import {KubectlFixture, markedContainer, parseRow} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/** Appends its name to the order file (argv[2]), waits argv[3] ms, exits with argv[4] (or keeps running without one). */
const step = `const fs = require('fs'); fs.appendFileSync(process.argv[2], process.argv[3] + '\\n'); setTimeout(() => { if (process.argv[5] !== undefined) process.exit(Number(process.argv[5])) }, Number(process.argv[4])); setInterval(() => {}, 1000)`

describeE2e('kubectl: init containers', () => {
  const f = new KubectlFixture('kinit')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('two init containers run in order: Init:0/2 while the first runs, then Running', async () => {
    const marker = uniqueName('init')
    const order = f.out('order.txt')
    const w = f.watch('inits')
    await f.create({
      metadata: {name: 'inits'},
      spec: {
        terminationGracePeriodSeconds: 2,
        initContainers: [markedContainer('first', step, marker, {args: [order, 'first', '1500', '0']}), markedContainer('second', step, marker, {args: [order, 'second', '0', '0']})],
        containers: [markedContainer('main', step, marker, {args: [order, 'main', '0']})],
      },
    })
    const init = parseRow(await w.waitLine((l) => parseRow(l)?.status === 'Init:0/2', 'Init:0/2'))!
    expect(init).toMatchObject({ready: '0/1', restarts: 0})
    const running = parseRow(await w.waitLine((l) => parseRow(l)?.status === 'Running', 'Running'))!
    expect(running).toMatchObject({ready: '1/1', restarts: 0})
    // kubectl never showed the main container running before the init containers were done.
    const statuses = w.lines.map((l) => parseRow(l)?.status)
    expect(statuses.indexOf('Init:0/2')).toBeLessThan(statuses.indexOf('Running'))
    expect(statuses.slice(statuses.indexOf('Running')).every((s) => !s?.startsWith('Init:'))).toBe(true)
    // Running is reported once main is spawned; its first line may come a moment later.
    await waitFor(async () => (await f.file('order.txt')).includes('main'), 'main to write', 10_000)
    expect(await f.file('order.txt')).toBe('first\nsecond\nmain\n')
    expect(await f.jsonpath('inits', '{range .status.initContainerStatuses[*]}{.name}={.state.terminated.reason}/{.state.terminated.exitCode};{end}')).toBe('first=Completed/0;second=Completed/0;')
    // Each condition as the kubelet writes it now, with nothing left over from when it was False.
    const conditions = await f.jsonpath('inits', '{range .status.conditions[*]}{.type}={.status}/{.reason}/{.message};{end}')
    expect(conditions).toContain('Initialized=True//;')
    expect(conditions).toContain('Ready=True//;')
    expect(conditions).toContain('ContainersReady=True//;')
    w.stop()
    await kubectl(['delete', 'pod', 'inits', '-n', f.ns, '--wait=false'])
    await f.gone('inits')
    await f.noProcess(marker)
  })

  test('a failing init container under restartPolicy Never: Init:Error, phase Failed, the main container never runs', async () => {
    const marker = uniqueName('initfail')
    const order = f.out('fail-order.txt')
    await f.create({
      metadata: {name: 'initfail'},
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 2,
        initContainers: [markedContainer('migrate', step, marker, {args: [order, 'migrate', '200', '3']}), markedContainer('never', step, marker, {args: [order, 'never', '0', '0']})],
        containers: [markedContainer('main', step, marker, {args: [order, 'main', '0']})],
      },
    })
    const row = await f
      .waitRow('initfail', (r) => r.status === 'Init:Error', 'Init:Error')
      .catch(async (error: Error) => {
        throw new Error(`${error.message}\n${JSON.stringify((await f.json('initfail')).status, null, 1)}`)
      })
    expect(row).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('initfail', '{.status.phase}|{.status.initContainerStatuses[0].state.terminated.reason}|{.status.initContainerStatuses[0].state.terminated.exitCode}')).toBe(
      'Failed|Error|3',
    )
    expect(await f.jsonpath('initfail', '{.status.conditions[?(@.type=="Initialized")].status}/{.status.conditions[?(@.type=="Initialized")].reason}')).toBe('False/ContainersNotInitialized')
    // What never started stays waiting, as the kubelet's TerminatePod leaves it.
    expect(await f.jsonpath('initfail', '{.status.initContainerStatuses[1].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.reason}')).toBe('PodInitializing|PodInitializing')
    expect(await f.file('fail-order.txt')).toBe('migrate\n')
    await f.noProcess(marker)
    expect(existsSync(order) && (await f.file('fail-order.txt')).includes('main')).toBe(false)
    await kubectl(['delete', 'pod', 'initfail', '-n', f.ns, '--wait=false'])
    await f.gone('initfail')
  })

  test('a sidecar (init container with restartPolicy Always) counts in READY; when main completes it is stopped and the pod Completed', async () => {
    const marker = uniqueName('sidecar')
    const order = f.out('sidecar-order.txt')
    await f.create({
      metadata: {name: 'sidecar'},
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 2,
        initContainers: [markedContainer('proxy', step, marker, {args: [order, 'proxy', '0'], restartPolicy: 'Always'})],
        containers: [markedContainer('main', step, marker, {args: [order, 'main', '2500', '0']})],
      },
    })
    const running = await f.waitRow('sidecar', (r) => r.status === 'Running' && r.ready === '2/2', 'Running 2/2')
    expect(running.restarts).toBe(0)
    // As on a kubelet, the main container's end is written first, with the sidecar still running (Completed, 1/2),
    // then the sidecar stopped and the pod Succeeded.
    const done = await f.waitRow('sidecar', (r) => r.status === 'Completed' && r.ready === '0/2', 'Completed 0/2', 20_000)
    expect(done).toMatchObject({ready: '0/2', restarts: 0})
    expect(await f.jsonpath('sidecar', '{.status.phase}|{.status.containerStatuses[0].state.terminated.exitCode}|{.status.initContainerStatuses[0].state.terminated.exitCode}')).toBe('Succeeded|0|143')
    await waitFor(async () => (await f.file('sidecar-order.txt')).includes('main'), 'main to write', 5_000)
    expect(await f.file('sidecar-order.txt')).toBe('proxy\nmain\n')
    await f.noProcess(marker)
    await kubectl(['delete', 'pod', 'sidecar', '-n', f.ns, '--wait=false'])
    await f.gone('sidecar')
  })
})
