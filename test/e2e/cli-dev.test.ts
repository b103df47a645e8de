import {afterAll, afterEach, beforeAll, expect, test} from '@jest/globals'
import type {V1Deployment} from '@kubernetes/client-node'
import {execa, type ResultPromise} from 'execa'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {DevPodLabel, DevReplacedAnnotation, RestartAnnotation} from '../../src/common/labels.js'
import {freePort} from '../../src/common/ports.js'
import {cliPath} from './env.mjs'
import {clients, createNamespace, deleteNamespace, describeE2e, kubectl, serverPort, startVnode, stopAllVnodes, testEnv, testWhen, type Clients, uniqueName, vnode, waitFor} from './helpers.js'

/** Is a program on PATH (the sandbox needs bwrap). */
const onPath = (name: string) => (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, name)))

const Toleration = {key: 'virtual-kubelet.io/provider', operator: 'Exists'}

/** The local code dev runs: an HTTP server that answers with its version, the ConfigMap's GREETING and the Secret's token. */
function serverSource(version: string): string {
  return `import http.server, os
port = int(os.environ['PORT'])
root = os.environ.get('VNODE_VOLUME_ROOT', '/')
token = open(os.path.join(root, 'etc/web-secret/token')).read().strip()
answer = f"${version} {os.environ['GREETING']} {token}".encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(answer)
    def log_message(self, *args):
        pass
print(f"serving ${version} on {port}", flush=True)
http.server.HTTPServer(('0.0.0.0', port), Handler).serve_forever()
`
}

/** A running `kubectl vnode dev`, its output kept. */
class DevProcess {
  out = ''
  err = ''
  readonly child: ResultPromise

  constructor(args: string[], cwd: string) {
    this.child = execa(cliPath(), ['dev', ...args], {env: testEnv(), cwd, reject: false, buffer: false, forceKillAfterDelay: false})
    this.child.stdout!.on('data', (d: Buffer) => (this.out += d.toString()))
    this.child.stderr!.on('data', (d: Buffer) => (this.err += d.toString()))
  }

  said(text: string | RegExp, timeoutMs = 60_000): Promise<boolean> {
    const seen = () => (typeof text === 'string' ? this.err.includes(text) || this.out.includes(text) : text.test(this.err) || text.test(this.out))
    return waitFor(seen, () => `dev to say ${text} (it said: ${this.err.slice(-1500)} | stdout: ${this.out.slice(-500)})`, timeoutMs)
  }

  async exitCode(timeoutMs = 90_000): Promise<number> {
    const r = await Promise.race([this.child, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`dev did not exit; it said: ${this.err.slice(-1500)}`)), timeoutMs).unref())])
    return r.exitCode ?? -1
  }
}

describeE2e('kubectl vnode dev', () => {
  let c: Clients
  const node = uniqueName('clidev')
  const ghost = uniqueName('ghost')
  const ns = uniqueName('dev')
  let dir: string
  let port: number
  const running: DevProcess[] = []

  // This file's node unless a test names one: other files' vnode nodes are Ready in the same cluster
  // (dev's own choice among several is unit-tested in test/unit/cli-dev.test.ts).
  const dev = (args: string[], cwd = dir) => {
    const p = new DevProcess(['-n', ns, ...(args.includes('--node') || args.includes('--restore') ? [] : ['--node', node]), ...args], cwd)
    running.push(p)
    return p
  }
  const devPods = async () => (await c.core.listNamespacedPod({namespace: ns, labelSelector: `${DevPodLabel}=true`})).items.filter((p) => !p.metadata?.deletionTimestamp)
  const devPod = () => waitFor(async () => (await devPods())[0], 'a dev pod', 60_000)
  const deployment = () => c.apps.readNamespacedDeployment({name: 'web', namespace: ns})
  const get = async (url: string) => {
    const r = await fetch(url, {signal: AbortSignal.timeout(5_000)})
    return r.ok ? await r.text() : undefined
  }
  const podGone = (name: string) => waitFor(async () => !(await c.core.listNamespacedPod({namespace: ns, fieldSelector: `metadata.name=${name}`})).items.length, `pod ${name} gone`, 60_000)

  beforeAll(async () => {
    c = await clients()
    const vnodeProcess = startVnode(node)
    await createNamespace(c.core, ns)
    await c.core.createNode({body: {metadata: {name: ghost}}})
    dir = mkdtempSync(join(tmpdir(), 'vnode-dev-'))
    port = await serverPort()
    writeFileSync(join(dir, 'server.py'), serverSource('v1'))
    await c.core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'web-config'}, data: {GREETING: 'hello', PORT: String(port)}}})
    await c.core.createNamespacedSecret({namespace: ns, body: {metadata: {name: 'web-secret'}, stringData: {token: 's3cret'}}})
    await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'web'}, spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: port}]}}})
    const body: V1Deployment = {
      metadata: {name: 'web'},
      spec: {
        replicas: 1,
        selector: {matchLabels: {app: 'web'}},
        template: {
          metadata: {labels: {app: 'web', tier: 'front'}},
          spec: {
            // This file's node only (dev drops it for a dev pod on another node).
            nodeSelector: {'kubernetes.io/hostname': node},
            tolerations: [Toleration],
            terminationGracePeriodSeconds: 5,
            volumes: [{name: 'secret', secret: {secretName: 'web-secret'}}],
            containers: [
              {
                name: 'app',
                image: 'python:3.12',
                // The image's own program would serve the port: the template's replica only sleeps, so the dev pod can bind it.
                command: ['python3', '-c', 'import time; time.sleep(100000)'],
                envFrom: [{configMapRef: {name: 'web-config'}}],
                volumeMounts: [{name: 'secret', mountPath: '/etc/web-secret', readOnly: true}],
                ports: [{containerPort: port}],
                readinessProbe: {tcpSocket: {port}, periodSeconds: 1},
                // A debugger's pause must not fail it: the dev container never gets it.
                livenessProbe: {exec: {command: ['true']}, periodSeconds: 5},
              },
            ],
          },
        },
      },
    }
    await c.apps.createNamespacedDeployment({namespace: ns, body})
    await c.kc.makeApiClient(c.lib.BatchV1Api).createNamespacedJob({
      namespace: ns,
      body: {
        metadata: {name: 'migrate'},
        // Suspended: the Job runs no pod of its own; dev runs its template.
        spec: {suspend: true, template: {spec: {restartPolicy: 'Never', containers: [{name: 'migrate', image: 'python:3.12', command: ['false'], envFrom: [{configMapRef: {name: 'web-config'}}]}]}}},
      },
    })
    await vnodeProcess.ready()
  })

  // A test that failed half-way leaves its dev running, its pods and perhaps the Deployment at 0: ended here with
  // dev's own --restore, so the next test starts from the file's state and the failure is reported once, by its test.
  afterEach(async () => {
    const left = running.filter((p) => p.child.exitCode === null)
    if (left.length === 0 && (await devPods()).length === 0) return
    for (const p of left) p.child.kill('SIGKILL')
    await Promise.all(left.map((p) => p.child.catch(() => undefined)))
    await vnode(['dev', '-n', ns, '--restore', 'deploy/web'])
    // Dev pods of the other workloads (a pod's copy, the StatefulSet's, the Job's) are not deploy/web's to restore.
    await c.core.deleteCollectionNamespacedPod({namespace: ns, labelSelector: `${DevPodLabel}=true`})
    await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns, labelSelector: `${DevPodLabel}=true`})).items.length === 0, "a failed test's dev pods gone", 60_000)
  })

  afterAll(async () => {
    for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL')
    await Promise.all(running.map((p) => p.child.catch(() => undefined)))
    await deleteNamespace(c?.core, ns)
    await c?.core.deleteNode({name: ghost}).catch(() => undefined)
    await stopAllVnodes()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  test('dev deploy/web -- python3 server.py: a pod of the template on the node, the Service selects it, a save restarts it through the node, --port reaches it; the terminal closing deletes it', async () => {
    const local = await serverPort()
    const d = dev(['deploy/web', '--node', node, '--port', `${local}:${port}`, '--', 'python3', 'server.py'])
    await d.said('serving v1 on')
    const pod = await devPod()
    expect(d.err).toContain(`pod/${pod.metadata!.name} created on node ${node}: container app runs python3 server.py`)
    expect(pod.metadata!.name).toMatch(/^web-dev-[0-9a-f]{5}$/)
    expect(pod.metadata!.labels).toMatchObject({app: 'web', tier: 'front', [DevPodLabel]: 'true'})
    const spec = pod.spec!
    expect(spec.nodeName).toBe(node)
    const app = spec.containers[0]
    expect(app).toMatchObject({command: ['python3', 'server.py'], workingDir: dir, envFrom: [{configMapRef: {name: 'web-config'}}]})
    expect(app.livenessProbe).toBeUndefined()
    expect(app.readinessProbe?.tcpSocket?.port).toBe(port)
    expect(spec.volumes!.map((v) => v.secret?.secretName ?? v.hostPath?.path).filter(Boolean)).toEqual(['web-secret', dir])
    // The local code answers, with the ConfigMap's env and the Secret's file: on the pod's address, and on localhost through --port.
    const running = await waitFor(async () => (await c.core.readNamespacedPod({name: pod.metadata!.name!, namespace: ns})).status?.podIP, 'the pod IP')
    expect(await waitFor(() => get(`http://${running}:${port}/`), 'the answer on the pod IP')).toBe('v1 hello s3cret')
    await d.said(`forwarding 127.0.0.1:${local} -> pod port ${port}`)
    expect(await waitFor(() => get(`http://127.0.0.1:${local}/`), 'the answer through --port')).toBe('v1 hello s3cret')
    // Ready through the template's readiness probe: one of the Service's endpoints.
    const discovery = c.kc.makeApiClient(c.lib.DiscoveryV1Api)
    await waitFor(
      async () =>
        (await discovery.listNamespacedEndpointSlice({namespace: ns, labelSelector: 'kubernetes.io/service-name=web'})).items.some((s) =>
          s.endpoints.some((e) => e.targetRef?.name === pod.metadata!.name && e.conditions?.ready),
        ),
      "the dev pod ready among the Service's endpoints",
      60_000,
    )

    writeFileSync(join(dir, 'server.py'), serverSource('v2'))
    expect(await waitFor(() => get(`http://127.0.0.1:${local}/`).then((a) => a?.startsWith('v2') && a), 'the edited answer', 60_000)).toBe('v2 hello s3cret')
    await d.said(/container app restarted \(restart 1\): server\.py changed/)
    await d.said('serving v2 on')
    const restarted = await c.core.readNamespacedPod({name: pod.metadata!.name!, namespace: ns})
    expect(restarted.status!.containerStatuses![0].restartCount).toBeGreaterThanOrEqual(1)
    // One save is one restart, unless a slow machine spread its writes over more than the debounce.
    expect(restarted.metadata!.annotations![RestartAnnotation]).toMatch(/^app:\d+$/)
    const events = await c.core.listNamespacedEvent({namespace: ns, fieldSelector: `involvedObject.name=${pod.metadata!.name}`})
    expect(events.items.map((e) => `${e.reason}: ${e.message}`)).toContain('Killing: Container app restart requested (vnode.dev/restart=app:1), will be restarted')

    d.child.kill('SIGHUP')
    expect(await d.exitCode()).toBe(0)
    expect(d.err).toContain('the terminal closed: stopping')
    expect(d.err).toContain(`pod/${pod.metadata!.name} deleted`)
    expect(await devPods()).toEqual([])
    expect(readFileSync(join(dir, 'server.py'), 'utf8')).toContain('v2')
  })

  test('--replace scales the Deployment to 0 (saving its replicas on it), names its autoscaler, and Ctrl-C scales it back', async () => {
    const autoscaling = c.kc.makeApiClient(c.lib.AutoscalingV2Api)
    const hpa = {metadata: {name: 'web'}, spec: {scaleTargetRef: {apiVersion: 'apps/v1', kind: 'Deployment', name: 'web'}, minReplicas: 1, maxReplicas: 2}}
    await autoscaling.createNamespacedHorizontalPodAutoscaler({namespace: ns, body: hpa})
    // The code as the first test's save left it, written again: this test does not depend on that one's passing.
    writeFileSync(join(dir, 'server.py'), serverSource('v2'))
    const d = dev(['deploy/web', '--replace', '--no-watch', '--', 'python3', 'server.py'])
    await d.said('deployment/web scaled to 0 (was 1;')
    await d.said('horizontalpodautoscaler/web targets deployment/web: it pauses at 0 replicas')
    const saved = await deployment()
    expect(saved.spec!.replicas).toBe(0)
    expect(JSON.parse(saved.metadata!.annotations![DevReplacedAnnotation])).toMatchObject({replicas: 1})
    await d.said('serving v2 on')
    d.child.kill('SIGINT')
    expect(await d.exitCode()).toBe(0)
    expect(d.err).toContain('deployment/web scaled back to 1')
    expect(await devPods()).toEqual([])
    const restored = await deployment()
    expect(restored.spec!.replicas).toBe(1)
    expect(restored.metadata!.annotations?.[DevReplacedAnnotation]).toBeUndefined()
    await autoscaling.deleteNamespacedHorizontalPodAutoscaler({name: 'web', namespace: ns})
  })

  test('kill -9 of dev --replace leaves the Deployment at 0; another --replace keeps the saved scale; dev --restore deletes the dev pods and restores it', async () => {
    writeFileSync(join(dir, 'server.py'), serverSource('v2'))
    const first = dev(['deploy/web', '--replace', '--no-watch', '--', 'python3', 'server.py'])
    await first.said('serving v2 on')
    const firstPod = await devPod()
    first.child.kill('SIGKILL')
    await first.exitCode()
    expect((await deployment()).spec!.replicas).toBe(0)
    // Its pod still runs and holds the port: the second one runs without binding it.
    const second = dev(['deploy/web', '--replace', '--no-watch', '--', 'python3', '-c', 'import time; print("second", flush=True); time.sleep(3600)'])
    await second.said('deployment/web stays at 0: an earlier dev saved its 1 replicas')
    await second.said('second')
    const secondPod = (await devPods()).find((p) => p.metadata!.name !== firstPod.metadata!.name)!
    second.child.kill('SIGKILL')
    await second.exitCode()
    expect(JSON.parse((await deployment()).metadata!.annotations![DevReplacedAnnotation])).toMatchObject({replicas: 1})
    const r = await vnode(['dev', '-n', ns, '--restore', 'deploy/web'])
    expect(r.stderr).toContain('deleted leftover dev pods: ')
    expect(r.stderr).toContain(firstPod.metadata!.name)
    expect(r.stderr).toContain(secondPod.metadata!.name)
    expect(r.stderr).toContain('deployment/web scaled back to 1')
    expect(r.exitCode).toBe(0)
    expect((await deployment()).spec!.replicas).toBe(1)
    await podGone(firstPod.metadata!.name!)
    await podGone(secondPod.metadata!.name!)
    const again = await vnode(['dev', '-n', ns, '--restore', 'deploy/web'])
    expect(again.exitCode).toBe(0)
    expect(again.stderr).toContain('deployment/web has no saved scale: nothing to restore')
  })

  test('a dev pod deleted by someone else ends dev with exit 1, and the replaced Deployment is restored all the same', async () => {
    const d = dev(['deploy/web', '--replace', '--no-watch', '--', 'python3', '-c', 'import time; print("up", flush=True); time.sleep(3600)'])
    await d.said('up')
    const pod = await devPod()
    const r = await kubectl(['delete', 'pod', '-n', ns, pod.metadata!.name!, '--wait=false'])
    expect(r.exitCode).toBe(0)
    expect(await d.exitCode()).toBe(1)
    expect(d.err).toContain(`error: pod/${pod.metadata!.name} was deleted`)
    expect(d.err).not.toContain('deleting pod/')
    expect(d.err).toContain('deployment/web scaled back to 1')
    expect((await deployment()).spec!.replicas).toBe(1)
  })

  test("a pod and a StatefulSet as WORKLOAD: a running pod's spec is copied without what the API server gave it, a claim template is an empty directory", async () => {
    const replica = await waitFor(
      async () => (await c.core.listNamespacedPod({namespace: ns, labelSelector: `app=web,!${DevPodLabel}`})).items.find((p) => p.status?.phase === 'Running'),
      "the Deployment's replica running",
      60_000,
    )
    const fromPod = dev([`pod/${replica.metadata!.name}`, '--no-watch', '--', 'python3', '-c', 'import time; print("copied", flush=True); time.sleep(3600)'])
    await fromPod.said('copied')
    const copy = await devPod()
    expect(copy.metadata!.labels!['pod-template-hash']).toBeUndefined()
    expect(copy.spec!.volumes!.filter((v) => v.name.startsWith('kube-api-access-'))).toHaveLength(1)
    fromPod.child.kill('SIGINT')
    expect(await fromPod.exitCode()).toBe(0)

    await c.apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: {name: 'db'},
        spec: {
          replicas: 0,
          serviceName: 'db',
          selector: {matchLabels: {app: 'db'}},
          volumeClaimTemplates: [{metadata: {name: 'data'}, spec: {accessModes: ['ReadWriteOnce'], resources: {requests: {storage: '1Gi'}}}}],
          template: {metadata: {labels: {app: 'db'}}, spec: {containers: [{name: 'db', image: 'python:3.12', volumeMounts: [{name: 'data', mountPath: '/var/lib/db'}]}]}},
        },
      },
    })
    const db = dev([
      'sts/db',
      '--no-watch',
      '--',
      'python3',
      '-c',
      'import os, time; print("data", os.path.isdir(os.path.join(os.environ["VNODE_VOLUME_ROOT"], "var/lib/db")), flush=True); time.sleep(3600)',
    ])
    await db.said('data True')
    expect(db.err).toContain("warning: volume data (a volumeClaimTemplate of statefulset/db) is an empty directory in the dev pod, not a replica's claim")
    db.child.kill('SIGINT')
    expect(await db.exitCode()).toBe(0)
    expect(await devPods()).toEqual([])
  })

  test("a Job's container runs once with the template's env, and its exit code is dev's", async () => {
    const d = dev(['job/migrate', '--no-watch', '--', 'python3', '-c', "import os; print('migrating', os.environ['GREETING']); raise SystemExit(3)"])
    expect(await d.exitCode()).toBe(3)
    expect(d.out).toContain('migrating hello')
    expect(d.err).toContain('container migrate exited with code 3 (Error)')
    expect(await devPods()).toEqual([])
  })

  test('bad inputs: error: ..., exit 1, and nothing created or scaled', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['deploy/nope', '--', 'true'], /^error: deployments\.apps "nope" not found in namespace "/],
      [['deploy/web', '-c', 'nope', '--replace', '--', 'true'], /^error: container "nope" not found in deployment\/web: choose one of \[app\]/],
      [['deploy/web', '--node', ghost, '--replace', '--', 'true'], /^error: node "[^"]+" is not a vnode node/],
      [['deploy/web', '--node', 'no-such-node', '--', 'true'], /^error: node "no-such-node" not found/],
      [['deploy/web'], /^error: missing the command to run: kubectl vnode dev deploy\/web -- COMMAND/],
      [['deploy/web', 'python3', 'server.py'], /^error: the command goes after --/],
      [['cronjob/web', '--', 'true'], /^error: invalid workload "cronjob\/web": unknown kind "cronjob"/],
      [['job/migrate', '--replace', '--', 'true'], /^error: --replace and --restore scale a Deployment or a StatefulSet/],
      [['deploy/web', '--watch-path', 'no-such-dir/**', '--', 'true'], /^error: --watch-path no-such-dir\/\*\*: .* is not a directory/],
    ]
    for (const [args, message] of cases) {
      const r = await vnode(['dev', '-n', ns, ...(args.includes('--node') ? [] : ['--node', node]), ...args])
      expect({args, stderr: r.stderr, exitCode: r.exitCode}).toEqual({args, stderr: expect.stringMatching(message), exitCode: 1})
    }
    const taken = await freePort('127.0.0.1')
    const holder = (await import('node:net')).createServer().listen(taken, '127.0.0.1')
    try {
      const r = await vnode(['dev', '-n', ns, '--node', node, 'deploy/web', '--port', `${taken}:80`, '--', 'true'])
      expect(r.exitCode).toBe(1)
      expect(r.stderr).toMatch(/^error: cannot listen on 127\.0\.0\.1:\d+ for --port \d+:80: the port is in use/)
    } finally {
      holder.close()
    }
    expect(await devPods()).toEqual([])
    const d: V1Deployment = await deployment()
    expect(d.spec!.replicas).toBe(1)
    expect(d.metadata!.annotations?.[DevReplacedAnnotation]).toBeUndefined()
  })

  test('a node that does not accept the namespace (its vnode.dev/allowed-namespaces): refused before anything is made, exit 1', async () => {
    const strict = uniqueName('strict')
    await startVnode(strict, ['--allowed-namespaces', 'kube-public']).ready()
    const r = await vnode(['dev', '-n', ns, 'deploy/web', '--node', strict, '--no-watch', '--', 'python3', 'server.py'])
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toContain(`error: node "${strict}" runs pods of namespace kube-public only, not "${ns}"`)
    expect(r.stderr).not.toMatch(/pod\/web-dev-[0-9a-f]{5} created/)
    expect(await devPods()).toEqual([])
    const d: V1Deployment = await deployment()
    expect(d.spec!.replicas).toBe(1)
  })

  testWhen(onPath('bwrap'), 'the namespaces sandbox needs bwrap')('in a sandbox the current directory is at its own path; a crash restarts the container and dev says how it ended', async () => {
    const sandboxed = uniqueName('sandboxed')
    await startVnode(sandboxed, ['--sandbox', 'namespaces']).ready()
    const script = "import os; print('in', os.getcwd(), open('server.py').read().count('serving'), flush=True); raise SystemExit(4)"
    const d = dev(['deploy/web', '--node', sandboxed, '--no-watch', '--', 'python3', '-c', script])
    await d.said(`in ${dir} 1`)
    await d.said(/container app restarted \(restart 1\): exited with code 4 \(Error\)/)
    d.child.kill('SIGINT')
    expect(await d.exitCode()).toBe(0)
    expect(await devPods()).toEqual([])
  })
})
