import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeE2e, processesMatching, runDir, uniqueName, waitFor} from './helpers.js'
import {NODE, nodeContainer, RuntimeHarness} from './runtime-harness.js'

describeE2e('runtime: termination, deadlines and leftovers', () => {
  const h = new RuntimeHarness()
  let out: string
  beforeAll(async () => {
    await h.setUp()
    out = mkdtempSync(join(runDir(), 'rt-term-'))
  })
  afterAll(() => h.tearDown())

  test('preStop runs first, then SIGTERM to the process group: a process that exits 0 on SIGTERM is Completed', async () => {
    const mark = uniqueName('graceful')
    const hookFile = join(out, 'prestop')
    const pod = await h.run({
      metadata: {name: 'graceful'},
      spec: {
        terminationGracePeriodSeconds: 10,
        containers: [
          nodeContainer(
            'app',
            `/*${mark}*/require('child_process').spawn('${NODE}',['-e','/*${mark}-child*/setInterval(()=>{},1000)']);process.on('SIGTERM',()=>{require('fs').appendFileSync('${hookFile}','term\\n');process.exit(0)});setInterval(()=>{},1000)`,
            {
              lifecycle: {preStop: {exec: {command: [NODE, '-e', `require('fs').appendFileSync('${hookFile}','prestop\\n')`]}}},
            },
          ),
        ],
      },
    })
    await h.waitContainer('graceful', 'app', (c) => !!c.state?.running, 'running')
    await waitFor(async () => (await processesMatching(mark)).length === 2 || undefined, 'the container and its child')
    const t0 = Date.now()
    await h.provider.deletePod(pod, 10)
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(readFileSync(hookFile, 'utf8')).toBe('prestop\nterm\n')
    expect(h.container('graceful', 'app')!.state!.terminated).toMatchObject({exitCode: 0, reason: 'Completed'})
    // The whole group went, the child too.
    expect(await processesMatching(mark)).toEqual([])
    const e = await h.waitEvent('graceful', (x) => x.reason === 'Killing', 'Killing event')
    expect(e).toMatchObject({type: 'Normal', message: 'Stopping container app'})
  })

  test('a container whose main process has exited gets no Killing and no preStop when its pod is deleted while its output drains; a running one beside it does', async () => {
    const mark = uniqueName('exited')
    const childMark = uniqueName('exited-child')
    const hookFile = join(out, 'exited-prestop')
    const goFile = join(out, 'exited-go')
    // The child leaves the group and keeps the container's stdout open: the instance's output drains for up to 2 s after its main process is gone.
    // The main process exits when the test says so, once the test knows its pid.
    const leaver = `/*${mark}*/require('child_process').spawn('${NODE}',['-e','/*${childMark}*/setInterval(()=>{},1000)'],{detached:true,stdio:['ignore','inherit','inherit']}).unref();setInterval(()=>{if(require('fs').existsSync('${goFile}'))process.exit(1)},20)`
    const pod = await h.run({
      metadata: {name: 'exited'},
      spec: {
        terminationGracePeriodSeconds: 5,
        // Not restarted: under load the drain may end before the delete, and a restarted leaver would rightly be killed.
        restartPolicy: 'Never',
        containers: [
          nodeContainer('steady', `/*${mark}-steady*/process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{},1000)`),
          nodeContainer('leaver', leaver, {lifecycle: {preStop: {exec: {command: [NODE, '-e', `require('fs').appendFileSync('${hookFile}','leaver\\n')`]}}}}),
        ],
      },
    })
    const child = await waitFor(
      async () => {
        // Its own argv: the leaver's carries the child's program too.
        const c = await processesMatching(`-e /*${childMark}*/`)
        return c.length === 1 ? c[0] : undefined
      },
      "the leaver's child running",
      20_000,
      20,
    )
    // Its main process and whatever of the runtime carries its argv, until the last of them is reaped (gone from /proc, not a zombie): the exit may
    // reach the node a moment later (the helper reports it over a pipe), and a stop then asks /proc whether the main process still runs.
    const leaverPids = await processesMatching(`/*${mark}*/`, {withRuntime: true})
    expect(leaverPids.length).toBeGreaterThan(0)
    writeFileSync(goFile, '')
    await waitFor(() => leaverPids.every((pid) => !existsSync(`/proc/${pid}`)) || undefined, "the leaver's main process reaped", 20_000, 20)
    expect(await processesMatching(`-e /*${childMark}*/`)).toEqual([child])
    try {
      await h.provider.deletePod(pod, 5)
      // The running container's Killing is the sign that the node's events of this stop are written.
      await h.waitEvent('exited', (e) => e.reason === 'Killing' && e.message === 'Stopping container steady', 'Killing steady')
      expect((await h.events('exited')).filter((e) => e.reason === 'Killing').map((e) => e.message)).toEqual(['Stopping container steady'])
      expect(existsSync(hookFile)).toBe(false)
    } finally {
      try {
        process.kill(child, 'SIGKILL')
      } catch {
        // Already gone: the container's cgroup took it.
      }
    }
    await waitFor(async () => (await processesMatching(mark)).length === 0, 'nothing of the pod left', 10_000, 100)
  })

  test('a process that ignores SIGTERM is SIGKILLed at the deadline: 137', async () => {
    const mark = uniqueName('stubborn')
    const pod = await h.run({
      metadata: {name: 'stubborn'},
      spec: {terminationGracePeriodSeconds: 3, containers: [nodeContainer('app', `/*${mark}*/process.on('SIGTERM',()=>{});setInterval(()=>{},1000)`)]},
    })
    await h.waitContainer('stubborn', 'app', (c) => !!c.state?.running, 'running')
    await new Promise((r) => setTimeout(r, 300))
    const t0 = Date.now()
    await h.provider.deletePod(pod, 3)
    const took = Date.now() - t0
    expect(took).toBeGreaterThanOrEqual(2_900)
    expect(took).toBeLessThan(4_500)
    expect(h.container('stubborn', 'app')!.state!.terminated).toMatchObject({exitCode: 137, reason: 'Error'})
    expect(h.container('stubborn', 'app')!.state!.terminated).not.toHaveProperty('signal')
    expect(await processesMatching(mark)).toEqual([])
  })

  test('deletePod again with a shorter grace moves the deadline closer (never below 2 s after SIGTERM)', async () => {
    const mark = uniqueName('shorter')
    const pod = await h.run({
      metadata: {name: 'shorter'},
      spec: {terminationGracePeriodSeconds: 60, containers: [nodeContainer('app', `/*${mark}*/process.on('SIGTERM',()=>{});setInterval(()=>{},1000)`)]},
    })
    await h.waitContainer('shorter', 'app', (c) => !!c.state?.running, 'running')
    await new Promise((r) => setTimeout(r, 300))
    const t0 = Date.now()
    const first = h.provider.deletePod(pod, 60)
    await new Promise((r) => setTimeout(r, 500))
    const second = h.provider.deletePod(pod, 0)
    await Promise.all([first, second])
    const took = Date.now() - t0
    expect(took).toBeGreaterThanOrEqual(1_900)
    expect(took).toBeLessThan(4_000)
    expect(h.container('shorter', 'app')!.state!.terminated!.exitCode).toBe(137)
    expect(await processesMatching(mark)).toEqual([])
  })

  test('activeDeadlineSeconds: the pod fails with DeadlineExceeded and its containers are stopped', async () => {
    const mark = uniqueName('deadline')
    await h.run({metadata: {name: 'deadline'}, spec: {activeDeadlineSeconds: 2, terminationGracePeriodSeconds: 2, containers: [nodeContainer('app', `/*${mark}*/setInterval(()=>{},1000)`)]}})
    await h.waitContainer('deadline', 'app', (c) => !!c.state?.running, 'running')
    const status = await waitFor(
      () => (h.status('deadline')?.reason === 'DeadlineExceeded' && h.container('deadline', 'app')?.state?.terminated ? h.status('deadline') : undefined),
      'DeadlineExceeded',
      10_000,
    )
    expect(status).toMatchObject({phase: 'Failed', reason: 'DeadlineExceeded', message: 'Pod was active on the node longer than the specified deadline'})
    expect(h.container('deadline', 'app')!.state!.terminated!.exitCode).toBe(143)
    await h.waitEvent('deadline', (e) => e.reason === 'DeadlineExceeded', 'DeadlineExceeded event')
    expect(await processesMatching(mark)).toEqual([])
  })

  test('cleanupPod removes the sandbox, secrets and logs; an unknown pod is NotFound', async () => {
    await h.c.core.createNamespacedSecret({namespace: h.ns, body: {metadata: {name: 'tls'}, stringData: {key: 'secret-bytes'}}})
    const pod = await h.run({
      metadata: {name: 'cleanme'},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [{name: 'tls', secret: {secretName: 'tls'}}],
        containers: [nodeContainer('app', `console.log('hi');setInterval(()=>{},1000)`, {volumeMounts: [{name: 'tls', mountPath: '/tls'}]})],
      },
    })
    await h.waitContainer('cleanme', 'app', (c) => !!c.state?.running, 'running')
    const sandbox = join(h.stateDir, 'pods', pod.metadata!.uid!)
    expect(existsSync(join(sandbox, 'volumes', 'tls', 'key'))).toBe(true)
    await h.provider.deletePod(pod, 2)
    await h.provider.cleanupPod(pod)
    expect(existsSync(sandbox)).toBe(false)
    expect(existsSync(join(h.stateDir, 'logs', `${h.ns}_cleanme_${pod.metadata!.uid}`))).toBe(false)
    expect(await h.provider.getPod(h.ns, 'cleanme')).toBeUndefined()
    await expect(h.provider.deletePod(pod, 1)).rejects.toMatchObject({kind: 'NotFound'})
  })

  test('close() leaves no process behind', async () => {
    const h2 = new RuntimeHarness()
    await h2.setUp()
    const mark = uniqueName('closing')
    try {
      await h2.run({
        metadata: {name: 'a'},
        spec: {
          containers: [
            nodeContainer('app', `/*${mark}*/process.on('SIGTERM',()=>{});require('child_process').spawn('${NODE}',['-e','/*${mark}-child*/setInterval(()=>{},1000)']);setInterval(()=>{},1000)`),
          ],
        },
      })
      await h2.run({metadata: {name: 'b'}, spec: {containers: [nodeContainer('app', `/*${mark}*/setInterval(()=>{},1000)`)]}})
      await waitFor(async () => (await processesMatching(mark)).length === 3 || undefined, 'three processes')
      await h2.provider.close()
      expect(await processesMatching(mark)).toEqual([])
    } finally {
      await h2.tearDown()
    }
  })
})
