import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, mkdtempSync, readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {DefaultContainerPath} from '../../src/emulator/runtime/env/env.js'
import {ImageMap} from '../../src/emulator/runtime/images/image-map.js'
import {containerLogDir, parseCriLine} from '../../src/emulator/runtime/logs/layout.js'
import {describeE2e, processesMatching, runDir, uniqueName, waitFor} from './helpers.js'
import {NODE, nodeContainer, RuntimeHarness} from './runtime-harness.js'
import {readPodRecord} from '../../src/emulator/runtime/pod/record.js'

/** A script that writes what the process sees to $OUT, then stays up. */
const REPORT = `const fs=require('fs');fs.writeFileSync(process.env.OUT+'.tmp',JSON.stringify({env:process.env,cwd:process.cwd(),argv:process.argv.slice(1)}));fs.renameSync(process.env.OUT+'.tmp',process.env.OUT);setInterval(()=>{},1000)`

function readReport(path: string): Promise<{env: Record<string, string>; cwd: string; argv: string[]}> {
  return waitFor(() => existsSync(path) && JSON.parse(readFileSync(path, 'utf8')), `report ${path}`, 15_000, 50)
}

describeE2e('runtime: what a container runs and sees', () => {
  const h = new RuntimeHarness()
  let out: string
  beforeAll(async () => {
    process.env.VNODE_LEAK_CANARY = 'must-not-leak'
    const images = ImageMap.parse(
      `images:\n  "mapped/app:*":\n    command: ["${NODE}", "-e"]\n    args: ["${REPORT.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"]\n    env: {FROM_IMAGE: image-value, SHADOWED: image}\n    workingDir: /tmp\n`,
      'test-images.yaml',
    )
    await h.setUp({images})
    out = mkdtempSync(join(runDir(), 'rt-out-'))
  })
  afterAll(async () => {
    delete process.env.VNODE_LEAK_CANARY
    await h.tearDown()
  })

  test('env is built from scratch: value, valueFrom (configMap, secret, field, resource), envFrom with prefix, service links, $(VAR) expansion', async () => {
    const {core} = h.c
    await core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'cfg'}, data: {A: 'alpha', B: 'beta'}}})
    await core.createNamespacedSecret({namespace: h.ns, body: {metadata: {name: 'sec'}, stringData: {P: 'pw'}}})
    const svc = await core.createNamespacedService({
      namespace: h.ns,
      body: {
        metadata: {name: 'web-api'},
        spec: {
          ports: [
            {name: 'http', port: 8080},
            {name: 'metrics', port: 9090, protocol: 'UDP'},
          ],
        },
      },
    })
    const mark = uniqueName('envmark')
    const file = join(out, 'env.json')
    await h.run({
      metadata: {name: 'env', labels: {app: 'envtest'}},
      spec: {
        restartPolicy: 'Always',
        terminationGracePeriodSeconds: 5,
        containers: [
          nodeContainer('app', `/*${mark}*/${REPORT}`, {
            args: ['$(GREETING)', '$$(FROM_CM)', '$(UNDEFINED_VAR)'],
            resources: {limits: {cpu: '1500m', memory: '64Mi'}},
            envFrom: [{configMapRef: {name: 'cfg'}, prefix: 'CM_'}],
            env: [
              {name: 'OUT', value: file},
              {name: 'FROM_CM', valueFrom: {configMapKeyRef: {name: 'cfg', key: 'A'}}},
              {name: 'FROM_SECRET', valueFrom: {secretKeyRef: {name: 'sec', key: 'P'}}},
              {name: 'GREETING', value: 'hello $(FROM_CM) $(CM_B)'},
              {name: 'ESCAPED', value: '$$(FROM_CM)'},
              {name: 'POD_NAME', valueFrom: {fieldRef: {fieldPath: 'metadata.name'}}},
              {name: 'POD_NS', valueFrom: {fieldRef: {fieldPath: 'metadata.namespace'}}},
              {name: 'POD_UID', valueFrom: {fieldRef: {fieldPath: 'metadata.uid'}}},
              {name: 'LABEL_APP', valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}},
              {name: 'NODE_NAME', valueFrom: {fieldRef: {fieldPath: 'spec.nodeName'}}},
              {name: 'POD_IP', valueFrom: {fieldRef: {fieldPath: 'status.podIP'}}},
              {name: 'CPU_LIMIT', valueFrom: {resourceFieldRef: {resource: 'limits.cpu'}}},
              {name: 'MEM_MI', valueFrom: {resourceFieldRef: {resource: 'limits.memory', divisor: '1Mi'}}},
              {name: 'ROOT_COPY', value: '$(VNODE_VOLUME_ROOT)/x'},
            ],
          }),
        ],
      },
    })
    const r = await readReport(file)
    const pod = h.latest.get('env')!
    expect(r.env.FROM_CM).toBe('alpha')
    expect(r.env.FROM_SECRET).toBe('pw')
    expect(r.env.GREETING).toBe('hello alpha beta')
    expect(r.env.ESCAPED).toBe('$(FROM_CM)')
    expect(r.env.CM_A).toBe('alpha')
    expect(r.env.POD_NAME).toBe('env')
    expect(r.env.POD_NS).toBe(h.ns)
    expect(r.env.POD_UID).toBe(pod.metadata!.uid)
    expect(r.env.LABEL_APP).toBe('envtest')
    expect(r.env.NODE_NAME).toBe(h.nodeName)
    expect(r.env.POD_IP).toBe('127.0.0.1')
    expect(r.env.CPU_LIMIT).toBe('2')
    expect(r.env.MEM_MI).toBe('64')
    expect(r.env.HOSTNAME).toBe('env')
    // Service links, as the kubelet derives them.
    const ip = svc.spec!.clusterIP!
    expect(r.env.WEB_API_SERVICE_HOST).toBe(ip)
    expect(r.env.WEB_API_SERVICE_PORT).toBe('8080')
    expect(r.env.WEB_API_SERVICE_PORT_METRICS).toBe('9090')
    expect(r.env.WEB_API_PORT).toBe(`tcp://${ip}:8080`)
    expect(r.env.WEB_API_PORT_9090_UDP_PROTO).toBe('udp')
    expect(r.env.KUBERNETES_SERVICE_HOST).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
    expect(r.env.KUBERNETES_SERVICE_PORT).toBe('443')
    // Nothing of vnode's own environment.
    expect(r.env.VNODE_LEAK_CANARY).toBeUndefined()
    expect(r.env.KUBECONFIG).toBeUndefined()
    expect(r.env.PATH).toBe(DefaultContainerPath)
    expect(Object.keys(r.env).filter((k) => process.env[k] !== undefined && !['PATH', 'HOME', 'HOSTNAME'].includes(k) && process.env[k] === r.env[k])).toEqual([])
    // Expansion in args; the default working directory is the container's volume root.
    expect(r.argv.slice(-3)).toEqual(['hello alpha beta', '$(FROM_CM)', '$(UNDEFINED_VAR)'])
    expect(r.env.VNODE_VOLUME_ROOT).toBe(join(h.stateDir, 'pods', pod.metadata!.uid!, 'roots', 'app'))
    expect(r.env.ROOT_COPY).toBe(`${r.env.VNODE_VOLUME_ROOT}/x`)
    expect(r.cwd).toBe(r.env.VNODE_VOLUME_ROOT)

    const cs = await h.waitContainer('env', 'app', (c) => c.ready === true, 'app ready')
    expect(cs.state?.running?.startedAt).toBeDefined()
    expect(cs.containerID).toMatch(/^vnode:\/\/[0-9a-f]{64}$/)
    expect(cs.image).toBe('node:test')
    expect(cs.imageID).toMatch(/^vnode:\/\/sha256:[0-9a-f]{64}$/)
    expect(cs.started).toBe(true)
    expect(cs.restartCount).toBe(0)
    for (const reason of ['Pulled', 'Created', 'Started']) {
      const e = await h.waitEvent('env', (x) => x.reason === reason, `${reason} event`)
      expect(e.involvedObject.fieldPath).toBe('spec.containers{app}')
      expect(e.source?.host).toBe(h.nodeName)
    }

    // Usage from /proc, and the on-disk record.
    const usage = h.provider.usage().find((u) => u.name === 'env')!
    expect(usage.containers[0].name).toBe('app')
    expect(usage.containers[0].memoryBytes).toBeGreaterThan(10 * 1024 * 1024)
    expect(usage.containers[0].processes).toBeGreaterThanOrEqual(1)
    expect(usage.containers[0].pid).toBeGreaterThan(0)
    expect(usage.containers[0].cpuSeconds).toBeGreaterThan(0)
    const record = readPodRecord(join(h.stateDir, 'pods', pod.metadata!.uid!))!
    expect(record.containers[0]).toMatchObject({name: 'app', running: true, restartCount: 0})
    expect(await processesMatching(mark)).toEqual([record.containers[0].pid])

    await h.provider.deletePod(pod, 5)
    expect(await processesMatching(mark)).toEqual([])
    const done = h.container('env', 'app')!
    expect(done.state?.terminated).toMatchObject({exitCode: 143, reason: 'Error'})
    // As the kubelet: no CRI reports the signal, exitCode (128 + 15) says it.
    expect(done.state?.terminated).not.toHaveProperty('signal')
  })

  test('image map: argv, env and workingDir come from the matching entry; no command and no mapping waits with CreateContainerError', async () => {
    const file = join(out, 'mapped.json')
    await h.run({
      metadata: {name: 'mapped'},
      spec: {
        containers: [
          {
            name: 'app',
            image: 'mapped/app:1.2',
            env: [
              {name: 'OUT', value: file},
              {name: 'SHADOWED', value: 'spec'},
            ],
          },
        ],
        terminationGracePeriodSeconds: 2,
      },
    })
    const r = await readReport(file)
    expect(r.env.FROM_IMAGE).toBe('image-value')
    expect(r.env.SHADOWED).toBe('spec')
    expect(r.cwd).toBe('/tmp')

    await h.run({metadata: {name: 'unmapped'}, spec: {containers: [{name: 'web', image: 'nginx:1.25'}]}})
    const cs = await h.waitContainer('unmapped', 'web', (c) => c.state?.waiting?.reason === 'CreateContainerError', 'CreateContainerError')
    expect(cs.state!.waiting!.message).toContain('image "nginx:1.25" matches no entry in the image map test-images.yaml')
    expect(cs.state!.waiting!.message).toContain('--images FILE')
    expect(cs.state!.waiting!.message).toContain('"nginx*"')
    const e = await h.waitEvent('unmapped', (x) => x.reason === 'Failed', 'Failed event')
    expect(e.type).toBe('Warning')
    expect(e.message).toMatch(/^Error: container "web" has no command/)
  })

  test('exit reporting: Completed 0 / Error n, terminationMessagePath, FallbackToLogsOnError, StartError 128 with a Warning event', async () => {
    await h.run({
      metadata: {name: 'exits'},
      spec: {
        restartPolicy: 'Never',
        containers: [
          nodeContainer('ok', `require('fs').writeFileSync(process.env.VNODE_VOLUME_ROOT+'/dev/termination-log','all good')`),
          nodeContainer('fails', `console.log('line one');console.error('last words');process.exit(3)`, {terminationMessagePolicy: 'FallbackToLogsOnError'}),
          nodeContainer('custom', `require('fs').writeFileSync('msg/here','custom message');process.exit(1)`, {terminationMessagePath: '/msg/here'}),
          {name: 'missing', image: 'x', command: ['/definitely/not/a/binary']},
        ],
      },
    })
    const ok = await h.waitContainer('exits', 'ok', (c) => !!c.state?.terminated, 'ok terminated')
    expect(ok.state!.terminated).toMatchObject({exitCode: 0, reason: 'Completed', message: 'all good'})
    const fails = await h.waitContainer('exits', 'fails', (c) => !!c.state?.terminated, 'fails terminated')
    expect(fails.state!.terminated).toMatchObject({exitCode: 3, reason: 'Error', message: 'line one\nlast words\n'})
    const custom = await h.waitContainer('exits', 'custom', (c) => !!c.state?.terminated, 'custom terminated')
    expect(custom.state!.terminated).toMatchObject({exitCode: 1, reason: 'Error', message: 'custom message'})
    const missing = await h.waitContainer('exits', 'missing', (c) => !!c.state?.terminated, 'missing terminated')
    expect(missing.state!.terminated).toMatchObject({exitCode: 128, reason: 'StartError'})
    expect(missing.state!.terminated!.message).toContain('"/definitely/not/a/binary"')
    expect(missing.restartCount).toBe(0)
    const e = await h.waitEvent('exits', (x) => x.reason === 'Failed' && x.involvedObject.fieldPath === 'spec.containers{missing}', 'StartError event')
    expect(e.type).toBe('Warning')
    // Nothing restarts under Never: the pod stays as it is.
    await new Promise((r) => setTimeout(r, 500))
    expect(h.container('exits', 'fails')!.restartCount).toBe(0)
  })

  test('logs: stdout and stderr in CRI format, one file per restart, rotated by size', async () => {
    const h2 = new RuntimeHarness()
    await h2.setUp({rotation: {maxBytes: 2000, maxFiles: 3}, crashLoop: {initialMs: 200, maxMs: 400}})
    try {
      const pod = await h2.run({
        metadata: {name: 'logs'},
        spec: {
          restartPolicy: 'OnFailure',
          containers: [
            nodeContainer(
              'app',
              `const n=require('fs').readdirSync('.').length;for(let i=0;i<200;i++)console.log('out line '+i);console.error('err line');process.stdout.write('no newline');setTimeout(()=>process.exit(1),50)`,
            ),
          ],
        },
      })
      await h2.waitContainer('logs', 'app', (c) => c.restartCount >= 1 && !!c.state?.running === false, 'a restart', 20_000)
      const dir = containerLogDir(h2.stateDir, h2.ns, 'logs', pod.metadata!.uid!, 'app')
      await waitFor(() => existsSync(join(dir, '1.log')), '1.log')
      const files = readdirSync(dir).sort()
      expect(files).toEqual(expect.arrayContaining(['0.log', '0.log.1', '1.log']))
      expect(files).not.toContain('0.log.3')
      const all = [join(dir, '0.log.2'), join(dir, '0.log.1'), join(dir, '0.log')]
        .filter(existsSync)
        .map((f) => readFileSync(f, 'utf8'))
        .join('')
      const recs = all
        .split('\n')
        .filter(Boolean)
        .map((l) => parseCriLine(l)!)
      expect(recs.every((r) => r !== undefined)).toBe(true)
      expect(recs.find((r) => r.content === 'err line')!.stream).toBe('stderr')
      expect(recs.find((r) => r.content === 'out line 199')).toMatchObject({stream: 'stdout', tag: 'F'})
      expect(recs.at(-1)).toMatchObject({content: 'no newline', stream: 'stdout'})
      // The oldest lines were rotated away (3 files kept of 2000 bytes each).
      expect(recs.find((r) => r.content === 'out line 0')).toBeUndefined()
      for (const r of recs) expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/)
    } finally {
      await h2.tearDown()
    }
  })
})
