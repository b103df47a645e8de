import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {describeE2e, waitFor} from './helpers.js'
import {nodeContainer, RuntimeHarness} from './runtime-harness.js'

/** Appends `<name> <ms>` to shared/order in the pod's emptyDir, then runs `then`. */
const mark = (name: string, then = '') => `const fs=require('fs');fs.appendFileSync('shared/order','${name} '+Date.now()+'\\n');${then}`
const shared = {volumeMounts: [{name: 'shared', mountPath: '/shared'}]}

describeE2e('runtime: init containers, sidecars, restart policy and CrashLoopBackOff', () => {
  const h = new RuntimeHarness()
  beforeAll(async () => {
    // No container GC here: a completed init container's lastState is asserted, which the kubelet's GC forgets within a minute.
    await h.setUp({crashLoop: {initialMs: 1000, maxMs: 2000}, containerGCPeriodMs: 0})
  })
  afterAll(() => h.tearDown())

  test('init containers run in order, each to exit 0, before the regular containers', async () => {
    await h.run({
      metadata: {name: 'inits'},
      spec: {
        volumes: [{name: 'shared', emptyDir: {}}],
        initContainers: [nodeContainer('first', mark('first', 'setTimeout(()=>{},300)'), shared), nodeContainer('second', mark('second'), shared)],
        containers: [nodeContainer('app', mark('app', 'setInterval(()=>{},1000)'), shared)],
        terminationGracePeriodSeconds: 2,
      },
    })
    await h.waitContainer('inits', 'app', (c) => !!c.state?.running, 'app running')
    // Every status reported before the app ran shows it waiting.
    const reports = h.reports.filter((p) => p.metadata!.name === 'inits')
    const firstRunning = reports.findIndex((p) => p.status!.containerStatuses!.some((c) => c.name === 'app' && c.state?.running))
    const before = reports.slice(0, firstRunning)
    expect(before.length).toBeGreaterThan(0)
    for (const p of before) {
      expect(p.status!.containerStatuses!.find((c) => c.name === 'app')!.state!.waiting!.reason).toBe('PodInitializing')
    }
    const s = h.status('inits')!
    expect(s.initContainerStatuses!.map((c) => [c.name, c.state?.terminated?.reason, c.ready])).toEqual([
      ['first', 'Completed', true],
      ['second', 'Completed', true],
    ])
    const pod = h.latest.get('inits')!
    const {readFileSync} = await import('node:fs')
    const {join} = await import('node:path')
    const file = join(h.stateDir, 'pods', pod.metadata!.uid!, 'volumes', 'shared', 'order')
    const order = await waitFor(() => {
      const lines = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
      return lines.length >= 3 ? lines : undefined
    }, 'three entries')
    expect(order.map((o) => o[0])).toEqual(['first', 'second', 'app'])
    expect(Number(order[1][1]) - Number(order[0][1])).toBeGreaterThanOrEqual(250)
  })

  test('a failing init container under restartPolicy Never fails the pod: nothing else starts or restarts', async () => {
    await h.run({
      metadata: {name: 'init-never'},
      spec: {restartPolicy: 'Never', initContainers: [nodeContainer('setup', 'process.exit(2)')], containers: [nodeContainer('app', 'setInterval(()=>{},1000)')]},
    })
    const init = await h.waitContainer('init-never', 'setup', (c) => !!c.state?.terminated, 'init terminated')
    expect(init.state!.terminated).toMatchObject({exitCode: 2, reason: 'Error'})
    await new Promise((r) => setTimeout(r, 1500))
    expect(h.container('init-never', 'setup')!.restartCount).toBe(0)
    expect(h.container('init-never', 'app')!.state!.waiting!.reason).toBe('PodInitializing')
  })

  test('a failing init container under OnFailure is restarted with backoff until it succeeds', async () => {
    await h.run({
      metadata: {name: 'init-retry'},
      spec: {
        restartPolicy: 'OnFailure',
        volumes: [{name: 'shared', emptyDir: {}}],
        initContainers: [nodeContainer('setup', mark('setup', `if(fs.readFileSync('shared/order','utf8').split('\\n').length<3)process.exit(1)`), shared)],
        containers: [nodeContainer('app', 'setInterval(()=>{},1000)')],
        terminationGracePeriodSeconds: 2,
      },
    })
    await h.waitContainer('init-retry', 'app', (c) => !!c.state?.running, 'app running after init retries', 20_000)
    const init = h.container('init-retry', 'setup')!
    expect(init.restartCount).toBe(1)
    expect(init.state!.terminated!.exitCode).toBe(0)
    expect(init.lastState!.terminated!.exitCode).toBe(1)
  })

  test('sidecars start before later containers, restart whatever the policy, and are stopped when the regular containers finish', async () => {
    await h.run({
      metadata: {name: 'sidecar'},
      spec: {
        restartPolicy: 'Never',
        volumes: [{name: 'shared', emptyDir: {}}],
        initContainers: [
          nodeContainer('proxy', mark('proxy', `if(fs.readFileSync('shared/order','utf8').split('\\n').length<3)process.exit(1);setInterval(()=>{},1000)`), {...shared, restartPolicy: 'Always'}),
        ],
        containers: [nodeContainer('app', mark('app', 'setTimeout(()=>{},2500)'), shared)],
        terminationGracePeriodSeconds: 2,
      },
    })
    const app = await h.waitContainer('sidecar', 'app', (c) => !!c.state?.terminated, 'app completed', 20_000)
    expect(app.state!.terminated!.reason).toBe('Completed')
    const proxy = await h.waitContainer('sidecar', 'proxy', (c) => !!c.state?.terminated, 'sidecar stopped after app', 10_000)
    expect(proxy.restartCount).toBe(1)
    expect(proxy.state!.terminated!.exitCode).toBe(143)
    await h.waitEvent('sidecar', (e) => e.reason === 'Killing' && e.message === 'Stopping container proxy', 'Killing proxy')
  })

  test('restartPolicy Always: the first restart is immediate, then CrashLoopBackOff with the kubelet message and a BackOff event', async () => {
    const pod = await h.run({metadata: {name: 'crash'}, spec: {containers: [nodeContainer('app', 'process.exit(1)')]}})
    const waiting = await h.waitContainer('crash', 'app', (c) => c.state?.waiting?.reason === 'CrashLoopBackOff', 'CrashLoopBackOff')
    // CrashLoopBackOff is reported from the sync after the one that found the back-off (the kubelet's reason cache):
    // with this harness's 1 s back-off that sync may come after a further restart, whose back-off is 2 s (the cap here).
    expect(waiting.restartCount).toBeGreaterThanOrEqual(1)
    expect(waiting.state!.waiting!.message).toBe(`back-off ${waiting.restartCount === 1 ? '1s' : '2s'} restarting failed container=app pod=crash_${h.ns}(${pod.metadata!.uid})`)
    expect(waiting.lastState!.terminated).toMatchObject({exitCode: 1, reason: 'Error'})
    const e = await h.waitEvent('crash', (x) => x.reason === 'BackOff', 'BackOff event')
    expect(e).toMatchObject({type: 'Warning', message: `Back-off restarting failed container app in pod crash_${h.ns}(${pod.metadata!.uid})`})
    // The next delay doubles: 2s (the cap here).
    const later = await h.waitContainer('crash', 'app', (c) => c.state?.waiting?.message?.startsWith('back-off 2s') === true, 'backoff 2s', 15_000)
    expect(later.restartCount).toBeGreaterThanOrEqual(2)
    // As the kubelet: every start reports its image, so Pulled counts what Started counts.
    const counts = await waitFor(
      async () => {
        const events = await h.events('crash')
        const n = (reason: string) => events.find((x) => x.reason === reason && x.involvedObject.fieldPath === 'spec.containers{app}')?.count ?? 0
        return n('Started') >= 2 && n('Pulled') === n('Started') ? {pulled: n('Pulled'), started: n('Started')} : undefined
      },
      'Pulled counted with every Started',
      15_000,
      200,
    )
    expect(counts.pulled).toBeGreaterThanOrEqual(2)
  })

  test('OnFailure does not restart a container that exited 0; Always does', async () => {
    await h.run({metadata: {name: 'onfailure'}, spec: {restartPolicy: 'OnFailure', containers: [nodeContainer('app', 'process.exit(0)')]}})
    await h.run({metadata: {name: 'always'}, spec: {restartPolicy: 'Always', containers: [nodeContainer('app', 'setTimeout(()=>process.exit(0),100)')], terminationGracePeriodSeconds: 2}})
    await h.waitContainer('always', 'app', (c) => c.restartCount >= 1, 'Always restarts after exit 0')
    const done = await h.waitContainer('onfailure', 'app', (c) => !!c.state?.terminated, 'OnFailure terminated')
    expect(done.restartCount).toBe(0)
    expect(done.state!.terminated!.reason).toBe('Completed')
  })
})

describeE2e('runtime: spec updates', () => {
  const h = new RuntimeHarness()
  beforeAll(() => h.setUp())
  afterAll(() => h.tearDown())

  test('a changed image restarts its container at once (Killing "definition changed"); other containers keep running', async () => {
    const pod = await h.run({
      metadata: {name: 'upd'},
      spec: {terminationGracePeriodSeconds: 2, containers: [nodeContainer('a', 'setInterval(()=>{},1000)'), nodeContainer('b', 'setInterval(()=>{},1000)')]},
    })
    await h.waitContainer('upd', 'a', (c) => !!c.state?.running, 'a running')
    const b0 = (await h.waitContainer('upd', 'b', (c) => !!c.state?.running, 'b running')).containerID
    const updated = structuredClone(pod)
    updated.spec!.containers[0].image = 'node:next'
    await h.provider.updatePod(updated)
    const a = await h.waitContainer('upd', 'a', (c) => c.restartCount === 1 && !!c.state?.running, 'a restarted', 10_000)
    expect(a.image).toBe('node:next')
    await h.waitEvent('upd', (e) => e.reason === 'Killing' && e.message === 'Container a definition changed, will be restarted', 'Killing a')
    expect(h.container('upd', 'b')).toMatchObject({restartCount: 0, containerID: b0})
  })
})

describeE2e('runtime: the default CrashLoopBackOff schedule', () => {
  const h = new RuntimeHarness()
  beforeAll(() => h.setUp())
  afterAll(() => h.tearDown())

  test('first restart immediately, the second on the first sync 10 s or more after the exit before it (the kubelet syncs a pod in back-off every 10-15 s)', async () => {
    await h.run({metadata: {name: 'crash10'}, spec: {containers: [nodeContainer('app', 'process.exit(1)')]}})
    // When the instance after `restarts` restarts ended, as a report showed it ended.
    const endedAt = (restarts: number) =>
      h.reports
        .filter((p) => p.metadata!.name === 'crash10')
        .map((p) => p.status!.containerStatuses![0])
        .find((c) => c.restartCount === restarts && c.state?.terminated)?.state?.terminated?.finishedAt
    const firstExit = new Date(await waitFor(() => endedAt(0), 'the first exit', 20_000, 50)).getTime()
    const secondStart = await waitFor(
      () => {
        const c = h.container('crash10', 'app')!
        return c.restartCount >= 2 ? c : undefined
      },
      'second restart',
      25_000,
      50,
    )
    // Its start: running, just ended (shown terminated until the sync after the one that finds it in back-off), or backing off.
    const second = secondStart.state?.running?.startedAt ?? secondStart.state?.terminated?.startedAt ?? secondStart.lastState?.terminated?.startedAt
    // The instance after the first restart exited; restart 2 came >= 10 s after it.
    const exitBefore = new Date(endedAt(1)!).getTime()
    expect(exitBefore).toBeGreaterThanOrEqual(firstExit)
    expect(new Date(second!).getTime() - exitBefore).toBeGreaterThanOrEqual(9_900)
    expect(new Date(second!).getTime() - exitBefore).toBeLessThan(16_000)
    expect(h.reports.find((p) => p.metadata!.name === 'crash10' && p.status!.containerStatuses![0].restartCount === 1)).toBeDefined()
  }, 40_000)
})

describeE2e('runtime: a start is reported at the relist that sees it', () => {
  const h = new RuntimeHarness()
  // A long relist makes the moment of the next one certain: the test starts just after one.
  const relistPeriodMs = 5_000
  beforeAll(() => h.setUp({sync: {relistPeriodMs}}))
  afterAll(() => h.tearDown())

  test('a container that ends before the next relist is never reported running; one that lives on is, from that relist', async () => {
    // The claim is about a container that ended before the relist after its start. On a loaded machine one may start
    // (or its end be seen) only after that relist: it was running then, and is rightly reported so. Such a try proves
    // nothing either way, so another is made; no try out of three where the premise held fails the test.
    const tries: string[] = []
    let states: string[] | undefined
    let lastingStartedAt = 0
    for (let i = 0; i < 3 && !states; i++) {
      await waitFor(() => Date.now() % relistPeriodMs < 200, 'just after a relist', 10_000, 20)
      const startedAt = Date.now()
      const relist = Math.ceil((startedAt + 1) / relistPeriodMs) * relistPeriodMs
      const name = `brief${i}`
      await h.run({metadata: {name}, spec: {restartPolicy: 'Never', containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', 'exit 3']}]}})
      if (i === 0) {
        lastingStartedAt = startedAt
        await h.run({metadata: {name: 'lasting'}, spec: {terminationGracePeriodSeconds: 2, containers: [nodeContainer('app', 'setInterval(()=>{},1000)')]}})
      }
      const ended = await h.waitContainer(name, 'app', (c) => !!c.state?.terminated, `${name} terminated`)
      expect(ended.state!.terminated!.exitCode).toBe(3)
      // finishedAt has second precision and the relist falls on a whole second: earlier means before the relist.
      const finishedAt = Date.parse(ended.state!.terminated!.finishedAt as unknown as string)
      if (finishedAt >= relist) {
        tries.push(`${name} ended at ${new Date(finishedAt).toISOString()}, not before the relist at ${new Date(relist).toISOString()}`)
        continue
      }
      states = h.reports.filter((p) => p.metadata!.name === name).map((p) => Object.keys(p.status!.containerStatuses![0].state ?? {})[0])
    }
    if (!states) throw new Error(`no container ended before the relist after its start: ${tries.join('; ')}`)
    expect(states).not.toContain('running')
    await h.waitContainer('lasting', 'app', (c) => !!c.state?.running, 'lasting running', 15_000)
    const firstRunning = h.reports.findIndex((p) => p.metadata!.name === 'lasting' && !!p.status!.containerStatuses![0].state?.running)
    expect(firstRunning).toBeGreaterThanOrEqual(0)
    // Not before the relist after its start.
    const relist = Math.ceil((lastingStartedAt + 1) / relistPeriodMs) * relistPeriodMs
    expect(Date.now()).toBeGreaterThanOrEqual(relist)
  }, 60_000)

  test('the init container after a sidecar starts once the relist has seen the sidecar run, not with it', async () => {
    await waitFor(() => Date.now() % relistPeriodMs < 200, 'just after a relist', 10_000, 20)
    const t0 = Date.now()
    await h.run({
      metadata: {name: 'chain'},
      spec: {
        terminationGracePeriodSeconds: 2,
        initContainers: [{...nodeContainer('side', 'setInterval(()=>{},1000)'), restartPolicy: 'Always'}, nodeContainer('next', 'process.exit(0)')],
        containers: [nodeContainer('app', 'setInterval(()=>{},1000)')],
      },
    })
    const next = await h.waitContainer('chain', 'next', (c) => !!c.state?.terminated, 'next ended', 20_000)
    const seen = (Math.floor(t0 / relistPeriodMs) + 1) * relistPeriodMs
    // startedAt has second precision; the relist is on a whole second.
    expect(new Date(next.state!.terminated!.startedAt!).getTime()).toBeGreaterThanOrEqual(seen)
    expect(new Date(h.container('chain', 'side')!.state!.running!.startedAt!).getTime()).toBeLessThan(seen)
    await h.provider.deletePod(structuredClone(h.latest.get('chain')!), 2)
  }, 30_000)

  test('an exit is reported at the relist that sees it (the container running until then); an exit a stop caused, at once', async () => {
    await waitFor(() => Date.now() % relistPeriodMs < 200, 'just after a relist', 10_000, 20)
    const t0 = Date.now()
    // Seen running at the next relist (t0 + 5 s), it exits about 7 s in: the relist after (t0 + 10 s) sees that.
    await h.run({metadata: {name: 'ends'}, spec: {restartPolicy: 'Never', containers: [nodeContainer('app', 'setTimeout(() => process.exit(3), 7000 - (Date.now() % 5000))')]}})
    await h.run({metadata: {name: 'stays'}, spec: {terminationGracePeriodSeconds: 2, containers: [nodeContainer('app', 'setInterval(()=>{},1000)')]}})
    await h.waitContainer('ends', 'app', (c) => !!c.state?.terminated, 'ends terminated', 20_000)
    const ends = h.reports.map((p, i) => ({p, at: h.reportedAt[i]})).filter(({p}) => p.metadata!.name === 'ends')
    const terminated = ends.findIndex(({p}) => !!p.status!.containerStatuses![0].state?.terminated)
    expect(terminated).toBeGreaterThan(0)
    expect(ends[terminated - 1].p.status!.containerStatuses![0].state?.running).toBeDefined()
    const secondRelist = (Math.floor(t0 / relistPeriodMs) + 2) * relistPeriodMs
    expect(ends[terminated].at).toBeGreaterThanOrEqual(secondRelist)
    expect(ends[terminated].p.status!.containerStatuses![0].state!.terminated!.exitCode).toBe(3)
    // A stop waits for the exit it causes and reports it then, between relists.
    await h.waitContainer('stays', 'app', (c) => !!c.state?.running, 'stays running', 15_000)
    await waitFor(() => Date.now() % relistPeriodMs > 500 && Date.now() % relistPeriodMs < 1_000, 'between relists', 10_000, 20)
    const stopAt = Date.now()
    await h.provider.deletePod(structuredClone(h.latest.get('stays')!), 2)
    const stopped = h.reports.map((p, i) => ({p, at: h.reportedAt[i]})).find(({p, at}) => p.metadata!.name === 'stays' && at >= stopAt && !!p.status!.containerStatuses![0].state?.terminated)
    expect(stopped).toBeDefined()
    expect(stopped!.at - stopAt).toBeLessThan(relistPeriodMs - 1_000)
  }, 45_000)
})
