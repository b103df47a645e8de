import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, NODE, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, processesMatching, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/** On SIGTERM: writes the time to argv[2] (when given), exits 0 after argv[3] ms. */
const trapper = `process.on('SIGTERM', () => { if (process.argv[2]) require('fs').writeFileSync(process.argv[2], String(Date.now())); setTimeout(() => process.exit(0), Number(process.argv[3] ?? 0)) }); setInterval(() => {}, 1000)`
const statusPath = '{.metadata.deletionTimestamp}|{.status.phase}|{.status.containerStatuses[0].state.terminated.exitCode}|{.status.containerStatuses[0].state.terminated.reason}{"\\n"}'

describeE2e('kubectl: termination', () => {
  const f = new KubectlFixture('kterm')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  const running = (name: string) => f.waitRow(name, (r) => r.status === 'Running' && r.ready === '1/1', 'Running 1/1')

  test('graceful delete of a process that traps SIGTERM and exits after 1 s: gone about 1 s later, not after the 30 s grace', async () => {
    const marker = uniqueName('graceful')
    await f.create({metadata: {name: 'graceful'}, spec: {terminationGracePeriodSeconds: 30, containers: [markedContainer('app', trapper, marker, {args: ['', '1000']})]}})
    await running('graceful')
    const w = f.watch('graceful', ['-o', `jsonpath=${statusPath}`])
    await w.waitLine((l) => l.includes('|Running|'), 'the watch')
    const started = Date.now()
    const del = await kubectl(['delete', 'pod', 'graceful', '-n', f.ns])
    const elapsed = Date.now() - started
    expect(del.exitCode).toBe(0)
    expect(del.stdout).toMatch(/^pod "graceful" deleted/)
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect(elapsed).toBeLessThan(6_000)
    // The container's own exit (0 after its cleanup) was written before the pod went away.
    await w.waitLine((l) => /^\S+\|Succeeded\|0\|Completed$/.test(l), 'exit 0 Completed in the watch')
    await f.noProcess(marker)
  })

  test('a preStop hook runs with the container env before SIGTERM', async () => {
    const marker = uniqueName('prestop')
    const hookScript = `require('fs').writeFileSync(process.env.HOOK_OUT, Date.now() + ' ' + process.env.POD_NAME)`
    await f.create({
      metadata: {name: 'prestop'},
      spec: {
        terminationGracePeriodSeconds: 10,
        containers: [
          markedContainer('app', trapper, marker, {
            args: [f.out('sigterm-at'), '0'],
            env: [
              {name: 'HOOK_OUT', value: f.out('prestop')},
              {name: 'POD_NAME', valueFrom: {fieldRef: {fieldPath: 'metadata.name'}}},
            ],
            lifecycle: {preStop: {exec: {command: [NODE, '-e', hookScript]}}},
          }),
        ],
      },
    })
    await running('prestop')
    const del = await kubectl(['delete', 'pod', 'prestop', '-n', f.ns])
    expect(del.exitCode).toBe(0)
    const [hookAt, podName] = (await f.file('prestop')).split(' ')
    expect(podName).toBe('prestop')
    const sigtermAt = Number(await f.file('sigterm-at'))
    expect(Number(hookAt)).toBeLessThanOrEqual(sigtermAt)
    await f.noProcess(marker)
  })

  test('a process that ignores SIGTERM is SIGKILLed at the grace deadline: exit 137 visible before the pod is removed', async () => {
    const marker = uniqueName('stubborn')
    await f.create({
      metadata: {name: 'stubborn'},
      spec: {terminationGracePeriodSeconds: 2, containers: [markedContainer('app', `process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)`, marker)]},
    })
    await running('stubborn')
    const w = f.watch('stubborn', ['-o', `jsonpath=${statusPath}`])
    await w.waitLine((l) => l.includes('|Running|'), 'the watch')
    const started = Date.now()
    expect((await kubectl(['delete', 'pod', 'stubborn', '-n', f.ns, '--wait=false'])).exitCode).toBe(0)
    const killed = await w.waitLine((l) => l.includes('|137|'), 'exit 137 in the watch', 15_000)
    const elapsed = Date.now() - started
    expect(killed).toMatch(/^\S+\|Failed\|137\|Error$/)
    expect(elapsed).toBeGreaterThanOrEqual(1_800)
    expect(elapsed).toBeLessThan(8_000)
    await f.gone('stubborn')
    await f.noProcess(marker)
  })

  test('activeDeadlineSeconds: Failed with reason DeadlineExceeded, the process stopped', async () => {
    const marker = uniqueName('deadline')
    await f.create({metadata: {name: 'deadline'}, spec: {activeDeadlineSeconds: 2, terminationGracePeriodSeconds: 2, containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker)]}})
    await running('deadline')
    await waitFor(async () => (await f.jsonpath('deadline', '{.status.phase}')) === 'Failed', 'phase Failed', 15_000)
    expect(await f.jsonpath('deadline', '{.status.phase}|{.status.reason}|{.status.message}')).toBe('Failed|DeadlineExceeded|Pod was active on the node longer than the specified deadline')
    // The container was stopped with SIGTERM; kubectl shows its reason over the pod's, as for any kubelet.
    expect(await f.jsonpath('deadline', '{.status.containerStatuses[0].state.terminated.exitCode}/{.status.containerStatuses[0].state.terminated.reason}')).toBe('143/Error')
    expect(await f.row('deadline')).toMatchObject({ready: '0/1', status: 'Error', restarts: 0})
    await f.noProcess(marker)
    // Said each time the pod's status is generated past the deadline, as the kubelet's activeDeadlineHandler does: the
    // sync that finds it, the kill's start and end, the terminated sync.
    await f.waitDescribe('deadline', /DeadlineExceeded\s+\S+ \(x4 over \S+\)\s+\S+\s+Pod was active on the node longer than the specified deadline/)
    await kubectl(['delete', 'pod', 'deadline', '-n', f.ns])
    await f.gone('deadline')
  })

  test('no process of a deleted pod is left, even for a force delete', async () => {
    const marker = uniqueName('force')
    await f.create({
      metadata: {name: 'forced'},
      spec: {
        terminationGracePeriodSeconds: 30,
        containers: [
          markedContainer(
            'app',
            `process.on('SIGTERM', () => {}); require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', process.argv[1] + '-child'], {stdio: 'ignore'}); setInterval(() => {}, 1000)`,
            marker,
          ),
        ],
      },
    })
    await running('forced')
    await waitFor(async () => (await processesMatching(marker)).length === 2, 'the container and its child', 10_000)
    expect((await kubectl(['delete', 'pod', 'forced', '-n', f.ns, '--grace-period=0', '--force'])).exitCode).toBe(0)
    await f.gone('forced')
    // Even a force delete gets the 2 s minimum kill grace; the whole process group goes.
    await f.noProcess(marker, 10_000)
  })

  test('a pod that never started (its ConfigMap is missing) is deleted at once, not after its 30 s grace', async () => {
    await f.create({
      metadata: {name: 'never'},
      spec: {terminationGracePeriodSeconds: 30, containers: [markedContainer('app', 'setInterval(() => {}, 1000)', uniqueName('never'), {envFrom: [{configMapRef: {name: 'absent'}}]})]},
    })
    await f.waitRow('never', (r) => r.status === 'CreateContainerConfigError', 'CreateContainerConfigError')
    const started = Date.now()
    expect((await kubectl(['delete', 'pod', 'never', '-n', f.ns])).exitCode).toBe(0)
    expect(Date.now() - started).toBeLessThan(5_000)
  })
})
