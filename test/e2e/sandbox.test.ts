import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, nodeHelper, processesMatching, runDir, startVnode, stopAllVnodes, uniqueName, waitFor} from './helpers.js'
import {descendants} from '../../src/emulator/runtime/process/proc.js'
import {readPodRecord} from '../../src/emulator/runtime/pod/record.js'

/** A shell container whose script writes what it sees to files under `out` (the host's /tmp is the container's too). */
function shell(name: string, script: string, extra: Record<string, unknown> = {}) {
  return {name, image: 'sh', command: ['/bin/sh', '-c', script], ...extra}
}

/** Nothing of a container left: its processes, and the bwrap that held its namespaces (it carries the same argv). */
async function noneLeft(marker: string): Promise<void> {
  await waitFor(async () => (await processesMatching(marker, {withRuntime: true})).length === 0, `no process with ${marker} left`, 15_000, 100)
}

describeE2e('pod sandbox (namespaces mode): what a container sees', () => {
  const f = new KubectlFixture('sbx')

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('the node says its mode', async () => {
    const r = await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.metadata.labels.vnode\\.dev/sandbox}'])
    expect(r.stdout).toBe('namespaces')
  })

  test('volumes at their real mountPaths, read-only where Kubernetes makes them so; the pod hostname, /etc/hosts, /etc/hostname; PID 1', async () => {
    await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: 'app'}, data: {LEVEL: 'debug'}}})
    const out = f.out('files')
    mkdirSync(out, {recursive: true})
    await f.create({
      metadata: {name: 'files'},
      spec: {
        hostname: 'web-0',
        subdomain: 'shop',
        hostAliases: [{ip: '10.1.2.3', hostnames: ['db.local']}],
        terminationGracePeriodSeconds: 1,
        volumes: [
          {name: 'config', configMap: {name: 'app'}},
          {name: 'scratch', emptyDir: {}},
        ],
        containers: [
          shell(
            'app',
            [
              `cat /etc/app/LEVEL > ${out}/level`,
              `hostname > ${out}/hostname`,
              `cat /etc/hostname > ${out}/etc-hostname`,
              `cat /etc/hosts > ${out}/hosts`,
              `echo $$$$ > ${out}/pid`,
              `(touch /etc/app/new 2> ${out}/ro-error; echo $$? > ${out}/ro-status)`,
              `echo kept > /data/note && cat /data/note > ${out}/scratch`,
              `pwd > ${out}/cwd`,
              `echo done > ${out}/done`,
              'trap "exit 0" TERM; while :; do sleep 1; done',
            ].join('; '),
            {
              volumeMounts: [
                {name: 'config', mountPath: '/etc/app'},
                {name: 'scratch', mountPath: '/data'},
              ],
            },
          ),
        ],
      },
    })
    await f.file('files/done')
    const read = (n: string) => readFileSync(join(out, n), 'utf8').trim()
    expect(read('level')).toBe('debug')
    expect(read('hostname')).toBe('web-0')
    expect(read('etc-hostname')).toBe('web-0')
    // The pod's own address (its network namespace's, or the node's on the host network), as the status reports it.
    let podIP: string | undefined
    await waitFor(async () => (podIP = (await f.c.core.readNamespacedPod({name: 'files', namespace: f.ns})).status?.podIP) !== undefined, 'the pod IP in its status')
    expect(read('hosts')).toContain(`\n${podIP}\tweb-0.shop.${f.ns}.svc.cluster.local\tweb-0`)
    expect(read('hosts')).toContain('# Entries added by HostAliases.\n10.1.2.3\tdb.local')
    expect(read('pid')).toBe('1')
    expect(read('ro-status')).not.toBe('0')
    expect(read('ro-error')).toMatch(/Read-only file system/)
    expect(read('scratch')).toBe('kept')
    expect(read('cwd')).toBe('/')
    // None of it reached the host: no /etc/app, no /data.
    expect(() => readFileSync('/etc/app/LEVEL')).toThrow()
    expect(() => readFileSync('/data/note')).toThrow()
    // kubectl exec runs inside the same namespaces.
    const r = await kubectl(['exec', 'files', '-n', f.ns, '--', 'cat', '/etc/app/LEVEL', '/etc/hostname'])
    expect(r.stdout).toBe('debugweb-0')
    const ps = await kubectl(['exec', 'files', '-n', f.ns, '--', 'cat', '/proc/1/cmdline'])
    expect(ps.stdout).toContain('/bin/sh')
  })

  test('in-cluster config works unchanged: kubectl in a pod, no kubeconfig, token at its real path', async () => {
    await kubectl(['create', 'rolebinding', 'view', '-n', f.ns, '--clusterrole=view', `--serviceaccount=${f.ns}:default`])
    const kubectlBin = join(process.env[E2eEnv.binDir]!, 'kubectl')
    const out = f.out('incluster')
    mkdirSync(out, {recursive: true})
    await f.create({
      metadata: {name: 'incluster'},
      spec: {
        restartPolicy: 'Never',
        containers: [
          shell(
            'ctl',
            [
              `cat /var/run/secrets/kubernetes.io/serviceaccount/namespace > ${out}/namespace`,
              `echo $$KUBERNETES_SERVICE_HOST:$$KUBERNETES_SERVICE_PORT > ${out}/service`,
              `${kubectlBin} get pods -o name > ${out}/pods 2> ${out}/err`,
              `echo $$? > ${out}/status`,
            ].join('; '),
            // A HOME without a kubeconfig: kubectl must find the in-cluster config by itself.
            {env: [{name: 'HOME', value: '/nonexistent'}]},
          ),
        ],
      },
    })
    await f.file('incluster/status', 30_000)
    const read = (n: string) => readFileSync(join(out, n), 'utf8').trim()
    expect({status: read('status'), err: read('err')}).toEqual({status: '0', err: ''})
    expect(read('pods')).toContain('pod/incluster')
    expect(read('namespace')).toBe(f.ns)
    const server = new URL(f.c.kc.getCurrentCluster()!.server)
    expect(read('service')).toBe(`${server.hostname}:${server.port}`)
  })

  test("the environment is the container's own: nothing of vnode's, no PWD from the sandbox", async () => {
    await f.create({metadata: {name: 'env'}, spec: {restartPolicy: 'Never', containers: [{name: 'env', image: 'env', command: ['/usr/bin/env'], env: [{name: 'PLAIN', value: 'x'}]}]}})
    await f.waitRow('env', (r) => r.status === 'Completed', 'Completed')
    const names = (await f.logs('env')).stdout
      .split('\n')
      .map((l) => l.split('=')[0])
      .filter(Boolean)
    expect(names.filter((n) => !/^(PATH|HOME|HOSTNAME|VNODE_VOLUME_ROOT|PLAIN|KUBERNETES_[A-Z0-9_]+)$/.test(n))).toEqual([])
  })

  test("a locale the host lacks, a variable perl reads: the sandbox's entry says nothing on the container's output and never runs perl with it", async () => {
    // The entry (sandbox/entry.ts) is a perl script as root: a missing locale would make perl warn on the container's
    // stderr, and PERL5OPT naming a module that is nowhere would make it fail before the container's program.
    const env = {LANG: 'xx_YY.UTF-8', PERL5OPT: '-Mvnode_never_installed'}
    for (const [name, vars] of [
      ['locale', {LANG: env.LANG}],
      ['perlopt', env],
    ] as const) {
      const given = Object.entries(vars).map(([k, value]) => ({name: k, value}))
      await f.create({metadata: {name}, spec: {restartPolicy: 'Never', containers: [{name, image: 'env', command: ['/usr/bin/env'], env: given}]}})
      await f.waitRow(name, (r) => r.status === 'Completed', 'Completed')
      const lines = (await f.logs(name)).stdout.split('\n').filter(Boolean)
      expect(lines.filter((l) => !/^(PATH|HOME|HOSTNAME|VNODE_VOLUME_ROOT|KUBERNETES_[A-Z0-9_]+)=/.test(l)).sort()).toEqual(given.map((g) => `${g.name}=${g.value}`).sort())
    }
  })

  test('auto, the default, picks the sandbox on a host that allows it', async () => {
    const name = uniqueName('sbxauto')
    const n = startVnode(name, ['--sandbox', 'auto'])
    await n.ready()
    const r = await kubectl(['get', 'node', name, '-o', 'jsonpath={.metadata.labels.vnode\\.dev/sandbox}'])
    expect(r.stdout).toBe('namespaces')
    expect(await n.stop()).toBe(0)
    await kubectl(['delete', 'node', name, '--wait=false'])
  })

  test("the node's helper starts its containers' sandboxes (bwrap is its child, not vnode's) and is gone once the node has stopped", async () => {
    const name = uniqueName('sbxhelper')
    const n = startVnode(name, ['--sandbox', 'namespaces'])
    await n.ready()
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {name: 'helped', namespace: f.ns},
      spec: {nodeName: name, terminationGracePeriodSeconds: 2, containers: [{name: 'sleeper', image: 'sleep', command: ['sleep', '3600']}]},
    }
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(pod))).exitCode).toBe(0)
    expect((await kubectl(['wait', '--for=condition=Ready', 'pod/helped', '-n', f.ns, '--timeout=60s'])).exitCode).toBe(0)
    const helper = nodeHelper(n.pid)
    expect(helper).toBeDefined()
    const bwraps = descendants(n.pid).filter((d) => d.comm === 'bwrap')
    expect(bwraps.length).toBeGreaterThan(0)
    expect(bwraps.every((b) => b.ppid === helper)).toBe(true)
    // The node's stop ends its pods; the helper reaps their sandboxes and goes.
    expect(await n.stop()).toBe(0)
    await waitFor(() => !existsSync(`/proc/${helper}`), `the helper ${helper} gone`, 15_000, 100)
    await kubectl(['delete', 'pod', 'helped', '-n', f.ns, '--grace-period=0', '--force'])
    await kubectl(['delete', 'node', name, '--wait=false'])
  })

  test('PID 1 ignores SIGTERM it has no handler for: a liveness kill of a plain sleep is exit 137', async () => {
    await f.create({
      metadata: {name: 'pid1'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [{name: 'sleeper', image: 'sleep', command: ['sleep', '3600'], livenessProbe: {exec: {command: ['false']}, periodSeconds: 1, failureThreshold: 1}}],
      },
    })
    const code = await waitFor(async () => (await f.jsonpath('pid1', '{.status.containerStatuses[0].lastState.terminated.exitCode}')) || undefined, 'a restart after the liveness kill', 30_000, 300)
    expect(code).toBe('137')
    await kubectl(['delete', 'pod', 'pid1', '-n', f.ns, '--grace-period=0', '--force'])
  })

  test('a daemon started with setsid ends with its pod', async () => {
    const marker = String(100000 + Math.floor(Math.random() * 800000))
    await f.create({
      metadata: {name: 'daemon'},
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [shell('d', `setsid sleep ${marker}1 & trap "exit 0" TERM; while :; do sleep 1; done`)],
      },
    })
    await waitFor(async () => (await processesMatching(`sleep ${marker}1`)).length > 0, 'the daemon running', 20_000, 100)
    await kubectl(['delete', 'pod', 'daemon', '-n', f.ns, '--wait=false'])
    await f.gone('daemon')
    await noneLeft(`${marker}1`)
  })

  test('a hostPath of no type whose path does not exist is made an empty directory (0755), as the runtime under a kubelet makes it', async () => {
    const out = f.out('hostpath-made')
    mkdirSync(out, {recursive: true})
    const made = join(out, 'made', 'by-node')
    await f.create({
      metadata: {name: 'hostpath-made'},
      spec: {
        restartPolicy: 'Never',
        volumes: [{name: 'host', hostPath: {path: made}}],
        containers: [shell('app', `ls -A /mnt/host > ${out}/listing && touch /mnt/host/written && echo ok > ${out}/done`, {volumeMounts: [{name: 'host', mountPath: '/mnt/host'}]})],
      },
    })
    await f.waitRow('hostpath-made', (r) => r.status === 'Completed', 'Completed')
    expect(readFileSync(join(out, 'done'), 'utf8')).toBe('ok\n')
    expect(readFileSync(join(out, 'listing'), 'utf8')).toBe('')
    expect(statSync(made).isDirectory()).toBe(true)
    expect(statSync(made).mode & 0o777).toBe(0o755)
    expect(existsSync(join(made, 'written'))).toBe(true)
  })

  test("no pod sees vnode's state dir: other pods' volumes and secrets", async () => {
    await f.c.core.createNamespacedSecret({namespace: f.ns, body: {metadata: {name: 'pw'}, stringData: {password: 's3cret'}}})
    const out = f.out('peek')
    mkdirSync(out, {recursive: true})
    await f.create({
      metadata: {name: 'holder'},
      spec: {
        terminationGracePeriodSeconds: 1,
        volumes: [{name: 'pw', secret: {secretName: 'pw'}}],
        containers: [shell('h', 'trap "exit 0" TERM; while :; do sleep 1; done', {volumeMounts: [{name: 'pw', mountPath: '/pw'}]})],
      },
    })
    await f.waitRow('holder', (r) => r.status === 'Running', 'Running')
    await f.create({
      metadata: {name: 'peek'},
      spec: {restartPolicy: 'Never', containers: [shell('p', `ls -A ${f.node.stateDir} > ${out}/list; grep -rl s3cret ${f.node.stateDir} > ${out}/found; echo $$? > ${out}/done`)]},
    })
    await f.file('peek/done')
    expect(readFileSync(join(out, 'list'), 'utf8')).toBe('')
    expect(readFileSync(join(out, 'found'), 'utf8')).toBe('')
  })

  test('subPath that escapes its volume through a symlink, a mountPath under /proc: the container waits with the reason, other pods run', async () => {
    const dir = mkdtempSync(join(runDir(), 'hostvol-'))
    symlinkSync('/etc', join(dir, 'escape'))
    writeFileSync(join(dir, 'ok'), 'fine')
    await f.create({
      metadata: {name: 'escape'},
      spec: {
        volumes: [{name: 'h', hostPath: {path: dir}}],
        containers: [shell('c', 'sleep 1', {volumeMounts: [{name: 'h', mountPath: '/x', subPath: 'escape'}]})],
      },
    })
    await f.create({
      metadata: {name: 'proc'},
      spec: {volumes: [{name: 'e', emptyDir: {}}], containers: [shell('c', 'sleep 1', {volumeMounts: [{name: 'e', mountPath: '/proc/vnode-test'}]})]},
    })
    await f.waitRow('escape', (r) => r.status === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(await f.jsonpath('escape', '{.status.containerStatuses[0].state.waiting.message}')).toMatch(/subPath "escape" resolves outside the volume/)
    await f.waitDescribe('escape', /Failed .*resolves outside the volume/)
    const msg = await waitFor(async () => (await f.jsonpath('proc', '{.status.containerStatuses[0].lastState.terminated.message}')) || undefined, 'the start error', 20_000, 300)
    expect(msg).toMatch(/\/proc\/vnode-test/)
    expect(existsSyncSafe('/proc/vnode-test')).toBe(false)
    // The node serves the rest: the first pod of this file still answers exec.
    const r = await kubectl(['exec', 'files', '-n', f.ns, '--', 'cat', '/etc/app/LEVEL'])
    expect(r.stdout).toBe('debug')
    rmSync(dir, {recursive: true, force: true})
  })
})

describeE2e('pod sandbox: a shared PID namespace, adoption after SIGKILL, nothing left after stop', () => {
  const f = new KubectlFixture('sbxpid')
  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('shareProcessNamespace: containers see each other, none is PID 1; the pod survives a SIGKILL of vnode and is adopted', async () => {
    const marker = String(100000 + Math.floor(Math.random() * 800000))
    await f.create({
      metadata: {name: 'shared'},
      spec: {
        shareProcessNamespace: true,
        terminationGracePeriodSeconds: 1,
        containers: [{name: 'a', image: 'sleep', command: ['sleep', `${marker}2`]}, shell('b', 'trap "exit 0" TERM; while :; do sleep 1; done')],
      },
    })
    await f.waitRow('shared', (r) => r.ready === '2/2', 'both containers running')
    const seen = await waitFor(
      async () => {
        const r = await kubectl(['exec', 'shared', '-n', f.ns, '-c', 'b', '--', 'sh', '-c', 'cat /proc/[0-9]*/cmdline | tr "\\0" " "; echo; echo self=$$'])
        return r.stdout.includes(`sleep ${marker}2`) ? r.stdout : undefined
      },
      "container a's process seen from b",
      15_000,
      300,
    )
    expect(seen).not.toMatch(/self=1$/)
    const before = await processesMatching(`sleep ${marker}2`)
    expect(before.length).toBeGreaterThan(0)
    const uid = await f.jsonpath('shared', '{.metadata.uid}')
    const holder = readPodRecord(join(f.node.stateDir, 'pods', uid))?.pidHolder
    expect(holder?.pid).toBeGreaterThan(0)

    // vnode dies without a word: the sandboxes live on, and the next vnode adopts them.
    expect(await f.node.stop('SIGKILL')).not.toBe(0)
    expect(await processesMatching(`sleep ${marker}2`)).toEqual(before)
    const again = startVnodeAgain(f)
    await again.ready()
    await waitFor(async () => (await kubectl(['exec', 'shared', '-n', f.ns, '-c', 'b', '--', 'true'])).exitCode === 0, 'exec into the adopted pod', 20_000, 300)
    expect(await f.jsonpath('shared', '{.status.containerStatuses[*].restartCount}')).toBe('0 0')

    // A normal exit ends every sandbox: no process, no holder of the shared namespace.
    expect(await again.stop('SIGTERM')).toBe(0)
    await noneLeft(`${marker}2`)
    expect(existsSync(`/proc/${holder!.pid}`)).toBe(false)
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    expect(mounts).not.toContain(f.node.stateDir)
  })
})

function startVnodeAgain(f: KubectlFixture) {
  f.node = startVnode(f.nodeName, ['--sandbox', 'namespaces'])
  return f.node
}

function existsSyncSafe(p: string): boolean {
  try {
    readFileSync(p)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}

describe('sandbox modes', () => {
  describeE2e('--sandbox none', () => {
    const f = new KubectlFixture('sbxnone')
    beforeAll(async () => {
      await f.setUp(['--sandbox', 'none'])
    })
    afterAll(async () => {
      await f.tearDown()
      await stopAllVnodes()
    })

    test('bare host processes: the node says none, mounts under $VNODE_VOLUME_ROOT, the host hostname', async () => {
      const r = await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.metadata.labels.vnode\\.dev/sandbox}'])
      expect(r.stdout).toBe('none')
      const out = f.out('plain')
      mkdirSync(out, {recursive: true})
      const name = uniqueName('p')
      await f.create({
        metadata: {name},
        spec: {restartPolicy: 'Never', containers: [shell('c', `echo $$VNODE_VOLUME_ROOT > ${out}/root; hostname > ${out}/hostname; echo $$$$ > ${out}/pid`)]},
      })
      await f.file('plain/pid')
      expect(readFileSync(join(out, 'root'), 'utf8').trim()).toContain(f.node.stateDir)
      expect(readFileSync(join(out, 'pid'), 'utf8').trim()).not.toBe('1')
    })
  })
})
