import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName} from './helpers.js'

/** Counts its instances in the file argv[2]; prints "instance N"; the first instance exits 1, later ones keep running. */
const failOnce = `const fs = require('fs'); const f = process.argv[2]; let n = 1; try { n = Number(fs.readFileSync(f, 'utf8')) + 1 } catch {} fs.writeFileSync(f, String(n)); console.log('instance ' + n); if (n === 1) process.exit(1); setInterval(() => {}, 1000)`

describeE2e('kubectl: restart policies, CrashLoopBackOff and logs', () => {
  const f = new KubectlFixture('krst')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('restartPolicy Always, a crashing container: CrashLoopBackOff, RESTARTS counts, lastState has the exit code, BackOff event', async () => {
    const marker = uniqueName('crash')
    await f.create({metadata: {name: 'crash'}, spec: {terminationGracePeriodSeconds: 2, containers: [markedContainer('app', `console.log('crashing'); process.exit(3)`, marker)]}})
    // The first restart is immediate; the second exit starts the 10 s back-off. As on a kubelet, the sync that finds
    // the container in back-off still reports it ended (kubectl: Error, the first instance its
    // lastState), and the sync after it, 10-15 s later on the pod worker's back-off, reports CrashLoopBackOff.
    const ended = await f.waitRow('crash', (r) => r.restarts === 1 && r.status === 'Error', 'Error after the second exit')
    expect(ended).toMatchObject({ready: '0/1'})
    const pod = await f.json('crash')
    const cs = pod.status!.containerStatuses![0]
    expect(pod.status!.phase).toBe('Running')
    expect(cs.restartCount).toBe(1)
    expect(cs.state!.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    expect(cs.lastState!.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    await f.waitDescribe('crash', /Warning\s+BackOff\s+.*Back-off restarting failed container app in pod crash_/)
    // After the back-off, it runs (and fails) again; the sync that restarts it showed CrashLoopBackOff for a moment.
    const again = await f.waitRow('crash', (r) => r.restarts === 2, 'RESTARTS 2')
    // Caught running for a moment, just exited, or backing off again.
    expect(['Running', 'Error', 'CrashLoopBackOff']).toContain(again.status)
    // Its 20 s back-off outlasts the pod worker's 10-15 s: CrashLoopBackOff shows from the sync after the one that found it.
    const backoff = await f.waitRow('crash', (r) => r.status === 'CrashLoopBackOff' && r.restarts === 2, 'CrashLoopBackOff with RESTARTS 2')
    expect(backoff).toMatchObject({ready: '0/1'})
    expect(backoff.lastRestart).toMatch(/ago$/)
    const waiting = (await f.json('crash')).status!.containerStatuses![0]
    expect(waiting.state!.waiting).toEqual({reason: 'CrashLoopBackOff', message: `back-off 20s restarting failed container=app pod=crash_${f.ns}(${pod.metadata!.uid})`})
    expect(waiting.lastState!.terminated).toMatchObject({exitCode: 3, reason: 'Error'})
    expect((await f.logs('crash')).stdout).toBe('crashing')
    await kubectl(['delete', 'pod', 'crash', '-n', f.ns, '--wait=false'])
    await f.gone('crash')
    await f.noProcess(marker)
  })

  test('kubectl logs shows the current instance and --previous the one before the restart', async () => {
    const marker = uniqueName('logs')
    await f.create({
      metadata: {name: 'twice'},
      spec: {restartPolicy: 'OnFailure', terminationGracePeriodSeconds: 2, containers: [markedContainer('app', failOnce, marker, {args: [f.out('count')]})]},
    })
    const row = await f.waitRow('twice', (r) => r.status === 'Running' && r.restarts === 1, 'Running after one restart')
    expect(row.ready).toBe('1/1')
    expect(await f.jsonpath('twice', '{.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.containerStatuses[0].lastState.terminated.reason}')).toBe('1/Error')
    const current = await f.logs('twice')
    expect(current).toMatchObject({exitCode: 0, stdout: 'instance 2'})
    const previous = await f.logs('twice', ['--previous'])
    expect(previous).toMatchObject({exitCode: 0, stdout: 'instance 1'})
    await kubectl(['delete', 'pod', 'twice', '-n', f.ns, '--wait=false'])
    await f.gone('twice')
    await f.noProcess(marker)
  })

  test('OnFailure exit 0: Completed and Succeeded; Never exit 2: Error and Failed; nothing restarts', async () => {
    const marker = uniqueName('term')
    await f.create({metadata: {name: 'done'}, spec: {restartPolicy: 'OnFailure', containers: [markedContainer('app', `console.log('done')`, marker)]}})
    await f.create({
      metadata: {name: 'failed'},
      spec: {
        restartPolicy: 'Never',
        containers: [markedContainer('app', `console.error('bad'); require('fs').writeFileSync(process.env.VNODE_VOLUME_ROOT + '/dev/termination-log', 'disk full'); process.exit(2)`, marker)],
      },
    })
    const done = await f.waitRow('done', (r) => r.status === 'Completed', 'Completed')
    expect(done).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('done', '{.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('Succeeded|Completed|0')
    const failed = await f.waitRow('failed', (r) => r.status === 'Error', 'Error')
    expect(failed).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('failed', '{.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('Failed|Error|2')
    const conditions = await f.jsonpath('failed', '{range .status.conditions[*]}{.type}={.status}/{.reason};{end}')
    expect(conditions).toContain('Ready=False/PodFailed;')
    expect(conditions).toContain('PodReadyToStartContainers=False/;')
    expect((await f.logs('failed')).stdout).toBe('bad')
    expect(await f.jsonpath('failed', '{.status.containerStatuses[0].state.terminated.message}')).toBe('disk full')
    // Terminal pods stay as they are (no restart later).
    await new Promise((r) => setTimeout(r, 1500))
    expect(await f.row('done')).toMatchObject({status: 'Completed', restarts: 0})
    expect(await f.row('failed')).toMatchObject({status: 'Error', restarts: 0})
    await kubectl(['delete', 'pod', 'done', 'failed', '-n', f.ns, '--wait=false'])
    await f.gone('done')
    await f.gone('failed')
    await f.noProcess(marker)
  })

  test('kubectl logs -f streams a running container and ends when it exits', async () => {
    const marker = uniqueName('follow')
    await f.create({
      metadata: {name: 'ticker'},
      spec: {restartPolicy: 'Never', containers: [markedContainer('app', `let i = 0; const t = setInterval(() => { console.log('tick ' + ++i); if (i === 5) { clearInterval(t) } }, 400)`, marker)]},
    })
    await f.waitRow('ticker', (r) => r.status === 'Running', 'Running')
    const started = Date.now()
    const followed = await f.logs('ticker', ['-f'])
    expect(followed).toMatchObject({exitCode: 0, stdout: 'tick 1\ntick 2\ntick 3\ntick 4\ntick 5'})
    // It followed the process until the end, not a snapshot.
    expect(Date.now() - started).toBeGreaterThan(500)
    await f.waitRow('ticker', (r) => r.status === 'Completed', 'Completed')
    await kubectl(['delete', 'pod', 'ticker', '-n', f.ns, '--wait=false'])
    await f.gone('ticker')
    await f.noProcess(marker)
  })
})
