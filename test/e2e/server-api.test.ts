import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {appendFileSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {Emulator} from '../../src/emulator/emulator.js'
import {containerLogFile, formatCriLine} from '../../src/emulator/runtime/logs/layout.js'
import {CriContainerLogs} from '../../src/emulator/runtime/logs/container-logs.js'
import type {PodUsage} from '../../src/emulator/server/sources.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, runDir, testEnv, uniqueName, waitFor} from './helpers.js'
import {direct, parsePrometheus} from './server-helpers.js'
import {E2eEnv} from './env.mjs'

describeE2e('kubelet API: kubectl logs, node proxy, stats and metrics with authn/authz', () => {
  let c: Clients
  const name = uniqueName('kapi')
  const ns = uniqueName('kapi')
  const role = `${ns}-nodes-proxy`
  let emulator: Emulator
  let port = 0
  let web: V1Pod
  let solo: V1Pod
  /** What the node knows about its pods: the API objects with the status a runtime would report. */
  let known: V1Pod[] = []
  const usage: PodUsage[] = []
  const stateDir = join(runDir(), 'nodes', name)
  const now = Date.now()
  const oldLine = new Date(now - 2 * 3600_000)
  // Milliseconds ending in a non-zero digit: Go's RFC3339Nano drops trailing zeros.
  const lastAt = new Date(Math.floor((now - 30_000) / 1000) * 1000 + 123)
  let admin: {cert: Buffer; key: Buffer}

  const running = (restartCount: number, lastState = false): V1Pod['status'] => ({
    phase: 'Running',
    containerStatuses: [
      {
        name: 'app',
        image: 'busybox',
        imageID: '',
        ready: true,
        restartCount,
        state: {running: {startedAt: new Date(now - 60_000)}},
        ...(lastState ? {lastState: {terminated: {exitCode: 1, reason: 'Error', containerID: 'vnode://prev'}}} : {}),
      },
    ],
  })
  const logFile = (pod: V1Pod, instance: number) => containerLogFile(stateDir, ns, pod.metadata!.name!, pod.metadata!.uid!, 'app', instance)
  const write = (file: string, text: string) => {
    mkdirSync(join(file, '..'), {recursive: true})
    writeFileSync(file, text)
  }

  beforeAll(async () => {
    c = await clients()
    const user = c.kc.getCurrentUser()!
    admin = {cert: Buffer.from(user.certData!, 'base64'), key: Buffer.from(user.keyData!, 'base64')}
    await createNamespace(c.core, ns)
    emulator = new Emulator({
      name,
      kubeconfig: kubeconfigPath(),
      port: 0,
      stateDir,
      // No provider runs these pods: the logs are the runtime's CRI files the test writes, for the pods it declares.
      kubelet: {
        pods: () => known,
        usage: () => usage,
        logs: new CriContainerLogs(stateDir, (namespace, podName) => known.find((p) => p.metadata?.namespace === namespace && p.metadata?.name === podName)),
      },
    })
    await emulator.start()
    port = (await c.core.readNode({name})).status!.daemonEndpoints!.kubeletEndpoint!.Port
    const spec = (podName: string): V1Pod => ({metadata: {name: podName, namespace: ns}, spec: {nodeName: name, containers: [{name: 'app', image: 'busybox'}]}})
    web = await c.core.createNamespacedPod({namespace: ns, body: spec('web')})
    solo = await c.core.createNamespacedPod({namespace: ns, body: spec('solo')})
    known = [
      {...web, status: running(1, true)},
      {...solo, status: running(0)},
    ]
    write(logFile(web, 0), formatCriLine('stdout', 'previous instance line', 'F', new Date(now - 120_000)) + formatCriLine('stderr', 'previous instance died', 'F', new Date(now - 61_000)))
    write(
      logFile(web, 1),
      formatCriLine('stdout', 'two hours ago', 'F', oldLine) +
        formatCriLine('stdout', 'hello from web', 'F', new Date(now - 50_000)) +
        formatCriLine('stderr', 'a warning', 'F', new Date(now - 40_000)) +
        formatCriLine('stdout', 'last line', 'F', lastAt),
    )
    write(logFile(solo, 0), formatCriLine('stdout', 'solo says hi', 'F', new Date(now - 10_000)))
    usage.push({
      namespace: ns,
      name: 'web',
      uid: web.metadata!.uid!,
      containers: [{name: 'app', cpuSeconds: 2.25, memoryBytes: 12_345_678, pid: process.pid, startTime: new Date(now - 60_000)}],
    })
  })

  let stopped = false
  afterAll(async () => {
    if (!stopped) await emulator?.stop({rm: true})
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'clusterrole,clusterrolebinding', role, '--ignore-not-found'])
  })

  test('node proxy: /healthz, /pods and /runningpods/ through the API server', async () => {
    const health = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/healthz`])
    expect(health).toMatchObject({exitCode: 0, stdout: 'ok'})
    const pods = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/pods`])
    expect(pods.exitCode).toBe(0)
    const list = JSON.parse(pods.stdout) as {kind: string; apiVersion: string; items: V1Pod[]}
    expect(list).toMatchObject({kind: 'PodList', apiVersion: 'v1'})
    expect(list.items.map((p) => p.metadata?.uid).sort()).toEqual([web.metadata!.uid, solo.metadata!.uid].sort())
    const w = list.items.find((p) => p.metadata?.name === 'web')!
    expect(w.status?.containerStatuses?.[0].restartCount).toBe(1)
    expect(w.spec?.nodeName).toBe(name)
    // Only web has a live process (the usage source reports a pid); solo's status says running but nothing runs it.
    const rp = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/runningpods/`])
    expect(rp.exitCode).toBe(0)
    const runningList = JSON.parse(rp.stdout) as {items: V1Pod[]}
    expect(runningList.items.map((p) => p.metadata?.name)).toEqual(['web'])
    expect(runningList.items[0].spec?.containers.map((x) => x.name)).toEqual(['app'])
  })

  test('/stats/summary and /metrics/resource report the node from /proc and the pod from the usage source', async () => {
    const raw = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/stats/summary`])
    expect(raw.exitCode).toBe(0)
    const s = JSON.parse(raw.stdout)
    expect(s.node.nodeName).toBe(name)
    expect(s.node.cpu.usageCoreNanoSeconds).toBeGreaterThan(0)
    expect(s.node.memory.workingSetBytes).toBeGreaterThan(0)
    const pod = s.pods.find((p: {podRef: {name: string}}) => p.podRef.name === 'web')
    expect(pod.podRef).toEqual({name: 'web', namespace: ns, uid: web.metadata!.uid})
    expect(pod.cpu.usageCoreNanoSeconds).toBe(2.25e9)
    expect(pod.memory.workingSetBytes).toBe(12_345_678)
    expect(pod.containers).toHaveLength(1)
    expect(pod.containers[0]).toMatchObject({name: 'app', cpu: {usageCoreNanoSeconds: 2.25e9}, memory: {workingSetBytes: 12_345_678}})
    expect(pod.containers[0].cpu.usageNanoCores).toBeGreaterThan(0)

    const m = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/metrics/resource`])
    expect(m.exitCode).toBe(0)
    const samples = parsePrometheus(m.stdout)
    expect(samples.get(`container_cpu_usage_seconds_total{namespace="${ns}",pod="web",container="app"}`)).toBe(2.25)
    expect(samples.get(`container_memory_working_set_bytes{namespace="${ns}",pod="web",container="app"}`)).toBe(12_345_678)
    expect(samples.get(`pod_cpu_usage_seconds_total{namespace="${ns}",pod="web"}`)).toBe(2.25)
    expect(samples.get(`pod_memory_working_set_bytes{namespace="${ns}",pod="web"}`)).toBe(12_345_678)
    expect(samples.get('node_cpu_usage_seconds_total')).toBeGreaterThan(0)
    expect(samples.get('node_memory_working_set_bytes')).toBeGreaterThan(0)
    expect(samples.get('resource_scrape_error')).toBe(0)
  })

  test('kubectl logs: plain, --tail, --timestamps, --since, --since-time, --limit-bytes, --previous', async () => {
    const plain = await kubectl(['logs', 'web', '-n', ns])
    expect(plain).toMatchObject({exitCode: 0, stdout: 'two hours ago\nhello from web\na warning\nlast line'})
    expect((await kubectl(['logs', 'web', '-n', ns, '--tail=2'])).stdout).toBe('a warning\nlast line')
    const ts = await kubectl(['logs', 'web', '-n', ns, '--timestamps', '--tail=1'])
    expect(ts.stdout).toBe(`${lastAt.toISOString()} last line`)
    expect((await kubectl(['logs', 'web', '-n', ns, '--since=1h'])).stdout).toBe('hello from web\na warning\nlast line')
    expect((await kubectl(['logs', 'web', '-n', ns, `--since-time=${new Date(now - 45_000).toISOString()}`])).stdout).toBe('a warning\nlast line')
    expect((await kubectl(['logs', 'web', '-n', ns, '--limit-bytes=8'])).stdout).toBe('two hour')
    const prev = await kubectl(['logs', 'web', '-n', ns, '--previous'])
    expect(prev).toMatchObject({exitCode: 0, stdout: 'previous instance line\nprevious instance died'})
    expect((await kubectl(['logs', 'solo', '-n', ns])).stdout).toBe('solo says hi')
  })

  test('kubectl logs errors: no previous instance, a missing container, a pod the node does not know', async () => {
    const noPrev = await kubectl(['logs', 'solo', '-n', ns, '--previous'])
    expect(noPrev.exitCode).not.toBe(0)
    expect(noPrev.stderr).toContain('previous terminated container "app" in pod "solo" not found')
    const missing = await kubectl(['logs', 'web', '-n', ns, '-c', 'nope'])
    expect(missing.exitCode).not.toBe(0)
    expect(missing.stderr).toContain('container nope is not valid for pod web')
    // Past the API server's own checks, the node answers with the kubelet's messages.
    expect(await direct(port, `/containerLogs/${ns}/web/nope`, admin)).toMatchObject({status: 404, body: 'container "nope" not found in pod "web"'})
    const ghost = await direct(port, `/containerLogs/${ns}/ghost/app`, admin)
    expect(ghost).toMatchObject({status: 404, body: 'pod "ghost" does not exist'})
  })

  test('kubectl logs -f streams a line appended while following and ends when the container ends', async () => {
    const child = execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), ['logs', '-f', 'web', '-n', ns, '--tail=1'], {env: testEnv(), reject: false, buffer: false})
    let out = ''
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    try {
      await waitFor(
        () => out.includes('last line\n'),
        () => `the existing tail line (got ${JSON.stringify(out)})`,
        15_000,
        50,
      )
      appendFileSync(logFile(web, 1), formatCriLine('stdout', 'appended while following'))
      await waitFor(
        () => out.includes('appended while following\n'),
        () => `the appended line (got ${JSON.stringify(out)})`,
        10_000,
        50,
      )
      // The container ends: the stream drains what is left and closes, so kubectl exits 0.
      appendFileSync(logFile(web, 1), formatCriLine('stdout', 'goodbye'))
      known = known.map((p) =>
        p.metadata?.name === 'web'
          ? {...p, status: {...p.status, containerStatuses: [{...p.status!.containerStatuses![0], ready: false, state: {terminated: {exitCode: 0, reason: 'Completed'}}}]}}
          : p,
      )
      let timer: NodeJS.Timeout | undefined
      const result = await Promise.race([child, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 15_000)))])
      clearTimeout(timer)
      expect(result?.exitCode).toBe(0)
      expect(out).toBe('last line\nappended while following\ngoodbye\n')
    } finally {
      child.kill('SIGKILL')
    }
  })

  test('authentication and authorization on the node port', async () => {
    // The serving certificate is the node's: self-signed (its own CA) at first, the cluster's once the
    // cluster issues the node's kubelet-serving CSR (--serving-cert auto); either is trusted here.
    const ca = [readFileSync(join(stateDir, 'pki', 'ca.crt')), readFileSync(join(dirname(kubeconfigPath()), 'pki', 'ca.crt'))]
    // No credentials: 401.
    const anon = await direct(port, '/pods', {ca})
    expect(anon).toMatchObject({status: 401, body: 'Unauthorized'})
    expect(anon.peer.subject.CN).toBe(`system:node:${name}`)
    // The cluster CA's admin certificate (system:masters): allowed by the SubjectAccessReview.
    expect((await direct(port, '/healthz', admin)).status).toBe(200)
    // A certificate from another CA is not accepted.
    const foreign = readFileSync(join(stateDir, 'pki', 'kubelet-serving.crt'))
    const foreignKey = readFileSync(join(stateDir, 'pki', 'kubelet-serving.key'))
    expect((await direct(port, '/healthz', {cert: foreign, key: foreignKey})).status).toBe(401)
    expect((await direct(port, '/healthz', {token: 'not-a-token'})).status).toBe(401)

    for (const sa of ['reader', 'noaccess']) await c.core.createNamespacedServiceAccount({namespace: ns, body: {metadata: {name: sa}}})
    expect((await kubectl(['create', 'clusterrole', role, '--verb=get', '--resource=nodes/proxy'])).exitCode).toBe(0)
    expect((await kubectl(['create', 'clusterrolebinding', role, `--clusterrole=${role}`, `--serviceaccount=${ns}:reader`])).exitCode).toBe(0)
    const token = async (sa: string) => (await kubectl(['create', 'token', sa, '-n', ns])).stdout.trim()
    const denied = await direct(port, '/pods', {token: await token('noaccess')})
    expect(denied).toMatchObject({status: 403, body: `Forbidden (user=system:serviceaccount:${ns}:noaccess, verb=get, resource=nodes, subresource(s)=[pods proxy])\n`})
    const readerToken = await token('reader')
    const allowed = await direct(port, '/pods', {token: readerToken})
    expect(allowed.status).toBe(200)
    expect((JSON.parse(allowed.body) as {items: V1Pod[]}).items).toHaveLength(2)
    expect((await direct(port, `/containerLogs/${ns}/solo/app`, {token: readerToken})).body).toBe('solo says hi\n')
    // nodes/proxy does not grant the stats subresource.
    const stats = await direct(port, '/stats/summary', {token: readerToken})
    expect(stats).toMatchObject({status: 403, body: `Forbidden (user=system:serviceaccount:${ns}:reader, verb=get, resource=nodes, subresource(s)=[stats])\n`})
  })

  test('paths and query values are validated: no traversal, clear 400s', async () => {
    const traversal = await direct(port, `/containerLogs/${ns}/..%2F..%2F..%2Fetc%2Fpasswd/app`, admin)
    expect(traversal.status).toBe(400)
    expect(traversal.body).toContain('invalid pod name "../../../etc/passwd"')
    const up = await direct(port, `/containerLogs/..%2Fkube-system/web/app`, admin)
    expect(up).toMatchObject({status: 400, body: expect.stringContaining('invalid namespace name "../kube-system"')})
    // Dot segments are resolved before routing: this is /web/app, no route.
    expect((await direct(port, `/containerLogs/%2E%2E/%2E%2E/web/app`, admin)).status).toBe(404)
    expect(await direct(port, `/containerLogs/${ns}/web/app?tailLines=abc`, admin)).toMatchObject({status: 400, body: expect.stringContaining('"tailLines" must be an integer')})
    expect(await direct(port, `/containerLogs/${ns}/web/app?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z`, admin)).toMatchObject({status: 400})
    expect(await direct(port, `/containerLogs/${ns}//app`, admin)).toMatchObject({status: 400, body: '{"message": "Missing podID."}'})
    expect((await direct(port, '/no/such/path', admin)).status).toBe(404)
  })

  test('stopping the node ends log follows and closes the port', async () => {
    const {request} = await import('node:https')
    let body = ''
    const ended = new Promise<string>((resolve, reject) => {
      const req = request({host: '127.0.0.1', port, path: `/containerLogs/${ns}/solo/app?follow=true`, ...admin, rejectUnauthorized: false, agent: false}, (res) => {
        res.setEncoding('utf8')
        res.on('data', (d: string) => (body += d))
        res.on('end', () => resolve('end'))
        res.on('error', () => resolve('error'))
        res.on('close', () => resolve('close'))
      })
      req.on('error', reject)
      req.end()
    })
    await waitFor(() => body.includes('solo says hi\n'), 'the follow to start', 10_000, 50)
    stopped = true
    await emulator.stop({rm: true})
    expect(['end', 'close', 'error']).toContain(await ended)
    await expect(direct(port, '/healthz', admin)).rejects.toThrow(/ECONNREFUSED/)
  })
})
