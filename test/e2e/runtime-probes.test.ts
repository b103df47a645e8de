import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeE2e, runDir, serverPort, waitFor} from './helpers.js'
import {NODE, nodeContainer, RuntimeHarness} from './runtime-harness.js'

/** An HTTP server on PORT: /healthz 200 once `ready-after` ms have passed, 503 before. */
const server = (port: number, readyAfterMs: number) =>
  `const t=Date.now();require('http').createServer((q,s)=>{s.statusCode=Date.now()-t>=${readyAfterMs}?200:503;s.end('ua='+q.headers['user-agent'])}).listen(${port},'127.0.0.1')`

/** A grpc.health.v1 server (h2c) on PORT: NOT_SERVING until `ready-after` ms have passed, SERVING after. */
const grpcServer = (port: number, readyAfterMs: number) =>
  `const t=Date.now();require('http2').createServer().on('stream',(s)=>{s.on('data',()=>{});s.on('end',()=>{s.respond({':status':200,'content-type':'application/grpc'},{waitForTrailers:true});s.on('wantTrailers',()=>s.sendTrailers({'grpc-status':'0'}));s.end(Buffer.from([0,0,0,0,2,8,Date.now()-t>=${readyAfterMs}?1:2]))})}).listen(${port},'127.0.0.1')`

describeE2e('runtime: probes and lifecycle hooks', () => {
  const h = new RuntimeHarness()
  let out: string
  beforeAll(async () => {
    await h.setUp({crashLoop: {initialMs: 500, maxMs: 1000}})
    out = mkdtempSync(join(runDir(), 'rt-probe-'))
  })
  afterAll(() => h.tearDown())

  test('readiness httpGet: not ready while failing (Unhealthy events), ready after successThreshold successes', async () => {
    const port = await serverPort()
    await h.run({
      metadata: {name: 'ready'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          nodeContainer('web', server(port, 1500), {
            ports: [{name: 'http', containerPort: port}],
            readinessProbe: {httpGet: {path: '/healthz', port: 'http'}, periodSeconds: 1, successThreshold: 2, failureThreshold: 1},
          }),
        ],
      },
    })
    const running = await h.waitContainer('ready', 'web', (c) => !!c.state?.running, 'running')
    const startedAt = new Date(running.state!.running!.startedAt!).getTime()
    expect(running.ready).toBe(false)
    expect(running.started).toBe(true)
    const e = await h.waitEvent('ready', (x) => x.reason === 'Unhealthy', 'Unhealthy event')
    expect(e).toMatchObject({type: 'Warning'})
    expect(e.message).toMatch(/^Readiness probe failed: (HTTP probe failed with statuscode: 503|Get "http:\/\/127\.0\.0\.1:\d+\/healthz": dial tcp 127\.0\.0\.1:\d+: connect: connection refused)$/)
    expect(e.involvedObject.fieldPath).toBe('spec.containers{web}')
    await h.waitContainer('ready', 'web', (c) => c.ready === true, 'ready', 10_000)
    // Healthy from 1.5 s, two consecutive successes one period apart.
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(2_400)
  })

  test("readiness grpc: the standard health service's NOT_SERVING fails with the kubelet's message, SERVING makes it ready", async () => {
    const port = await serverPort()
    await h.run({
      metadata: {name: 'grpc'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [nodeContainer('app', grpcServer(port, 2500), {readinessProbe: {grpc: {port}, periodSeconds: 1, failureThreshold: 1}})],
      },
    })
    const e = await h.waitEvent('grpc', (x) => x.reason === 'Unhealthy' && /NOT_SERVING/.test(x.message ?? ''), 'Unhealthy event')
    expect(e).toMatchObject({type: 'Warning', message: 'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")'})
    await h.waitContainer('grpc', 'app', (c) => c.ready === true, 'ready', 15_000)
    expect((await h.events('grpc')).filter((x) => x.reason === 'ProbeWarning')).toEqual([])
  })

  test('liveness exec failure: the container is killed with the kubelet message and restarted', async () => {
    const flag = join(out, 'alive')
    await h.run({
      metadata: {name: 'live'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          nodeContainer('app', `setInterval(()=>{},1000)`, {
            livenessProbe: {exec: {command: [NODE, '-e', `if(!require('fs').existsSync('${flag}')){console.log('no flag');process.exit(1)}`]}, periodSeconds: 1, failureThreshold: 2},
          }),
        ],
      },
    })
    const c = await h.waitContainer('live', 'app', (x) => x.restartCount >= 1, 'a liveness restart', 15_000)
    expect(c.lastState!.terminated!.exitCode).toBe(143)
    const kill = await h.waitEvent('live', (x) => x.reason === 'Killing', 'Killing event')
    expect(kill.message).toBe('Container app failed liveness probe, will be restarted')
    const unhealthy = await h.waitEvent('live', (x) => x.reason === 'Unhealthy', 'Unhealthy')
    expect(unhealthy.message).toBe('Liveness probe failed: no flag\n')
  })

  test('startup probe (tcpSocket): liveness and readiness wait for it; started and ready follow; a startup failure restarts', async () => {
    const port = await serverPort()
    await h.run({
      metadata: {name: 'startup'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          nodeContainer('slow', `setTimeout(()=>{${server(port, 0)}},1200);setInterval(()=>{},1000)`, {
            startupProbe: {tcpSocket: {port}, periodSeconds: 1, failureThreshold: 10},
            // Would fail before the server listens: it must not run until the startup probe passed.
            livenessProbe: {tcpSocket: {port}, periodSeconds: 1, failureThreshold: 1},
          }),
          nodeContainer('never', `setInterval(()=>{},1000)`, {startupProbe: {tcpSocket: {port: 1}, periodSeconds: 1, failureThreshold: 2}}),
        ],
      },
    })
    const early = await h.waitContainer('startup', 'slow', (c) => !!c.state?.running, 'running')
    expect(early.started).toBe(false)
    expect(early.ready).toBe(false)
    const ok = await h.waitContainer('startup', 'slow', (c) => c.started === true && c.ready === true, 'started and ready', 10_000)
    expect(ok.restartCount).toBe(0)
    await h.waitContainer('startup', 'never', (c) => c.restartCount >= 1, 'startup failure restart', 15_000)
    const kill = await h.waitEvent('startup', (x) => x.reason === 'Killing' && x.involvedObject.fieldPath === 'spec.containers{never}', 'Killing never')
    expect(kill.message).toBe('Container never failed startup probe, will be restarted')
    expect(h.container('startup', 'slow')!.restartCount).toBe(0)
  })

  test('postStart exec hook runs after the start; a failing postStart hook kills the container (FailedPostStartHook)', async () => {
    const hookFile = join(out, 'poststart')
    await h.run({
      metadata: {name: 'hooks'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          nodeContainer('good', `setInterval(()=>{},1000)`, {
            lifecycle: {postStart: {exec: {command: [NODE, '-e', `require('fs').writeFileSync('${hookFile}',process.env.HOOK_ENV)`]}}},
            env: [{name: 'HOOK_ENV', value: 'from-container-env'}],
          }),
          nodeContainer('bad', `setInterval(()=>{},1000)`, {lifecycle: {postStart: {httpGet: {port: 1, path: '/'}}}}),
        ],
      },
    })
    await waitFor(() => existsSync(hookFile), 'postStart hook output')
    expect(readFileSync(hookFile, 'utf8')).toBe('from-container-env')
    const e = await h.waitEvent('hooks', (x) => x.reason === 'FailedPostStartHook', 'FailedPostStartHook')
    expect(e).toMatchObject({type: 'Warning', message: 'PostStartHook failed'})
    expect(e.involvedObject.fieldPath).toBe('spec.containers{bad}')
    await h.waitContainer('hooks', 'bad', (c) => c.restartCount >= 1, 'bad restarted', 10_000)
    expect(h.container('hooks', 'good')!.restartCount).toBe(0)
  })

  test('initialDelaySeconds: no readiness probe before the delay', async () => {
    const port = await serverPort()
    await h.run({
      metadata: {name: 'delay'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [nodeContainer('web', server(port, 0), {readinessProbe: {httpGet: {path: '/', port}, initialDelaySeconds: 2, periodSeconds: 1}})],
      },
    })
    const running = await h.waitContainer('delay', 'web', (c) => !!c.state?.running, 'running')
    const startedAt = new Date(running.state!.running!.startedAt!).getTime()
    await h.waitContainer('delay', 'web', (c) => c.ready === true, 'ready', 10_000)
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_900)
  })
})
