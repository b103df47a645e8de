import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execFile, execFileSync} from 'node:child_process'
import {promisify} from 'node:util'
import {existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:net'
import {dirname, join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {KubectlFixture} from './kubectl-fixture.js'
import {expectInteractiveShell} from './tty-exec.js'
import {createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, processesMatching, runDir, stopAllVnodes, testWhen, uniqueName, waitFor} from './helpers.js'

const kubectlBin = () => join(process.env[E2eEnv.binDir]!, 'kubectl')

/** A shell container (the host's sh, the image map's `sh`). */
function shell(name: string, script: string, extra: Record<string, unknown> = {}) {
  return {name, image: 'sh', command: ['/bin/sh', '-c', script], ...extra}
}

/** A unix socket listening at path, answering each connection with a line. */
function listenAt(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((c) => c.end('hello from the host\n'))
    server.once('error', reject)
    server.listen(path, () => resolve(server))
  })
}

/** A shell loop that tries each socket with perl (the host's, core modules only): `<path> CONNECTED <its line>` or `<path> refused <why>`. */
function socketProbe(paths: string[]): string {
  return `for p in ${paths.join(' ')}; do perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or do { print "$ARGV[0] refused $!\\n"; exit }; print "$ARGV[0] CONNECTED ", scalar <$s>' "$p"; done`
}

/**
 * The filesystem walls of the pod sandbox (docs/SECURITY.md, "Root
 * filesystem", "Hidden paths", "exec, probes and hooks"): the host's files
 * read-only under a writable layer of each instance's own, credentials out
 * of sight whatever the path, exec inside the container.
 */
describeE2e('the sandbox walls: root filesystem, hidden paths, exec inside', () => {
  const f = new KubectlFixture('walls')
  const other = uniqueName('walls-other')
  const caKey = join(dirname(kubeconfigPath()), 'pki', 'ca.key')
  let token = ''
  let tokenPath = ''

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
    // Another namespace's pod, with its service account token: what no other pod may read.
    await createNamespace(f.c.core, other)
    await f.c.core.createNamespacedPod({
      namespace: other,
      body: {metadata: {name: 'holder'}, spec: {nodeName: f.nodeName, terminationGracePeriodSeconds: 1, containers: [shell('main', 'trap "exit 0" TERM; while :; do sleep 1; done')]}},
    })
    const uid = (await f.c.core.readNamespacedPod({namespace: other, name: 'holder'})).metadata!.uid!
    tokenPath = await waitFor(() => {
      const vols = join(f.node.stateDir, 'pods', uid, 'volumes')
      const name = existsSync(vols) ? readdirSync(vols).find((n) => n.startsWith('kube-api-access')) : undefined
      const p = name && join(vols, name, 'token')
      return p && existsSync(p) ? p : undefined
    }, "the other pod's token")
    token = readFileSync(tokenPath, 'utf8')
  })
  afterAll(async () => {
    await deleteNamespace(f.c?.core, other)
    await f.tearDown()
    await stopAllVnodes()
  })

  test('a file written outside volumes stays in the instance layer: not on the host, counted in the pod state dir, gone after a restart', async () => {
    const marker = `/opt/vnode-walls-${f.ns}`
    const out = f.out('layer')
    try {
      await f.create({
        metadata: {name: 'layer'},
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            shell(
              'main',
              [
                `mkdir -p ${out}`,
                `if [ -f ${out}/first ]; then (test -e ${marker} && echo present || echo absent) > ${out}/second; while :; do sleep 1; done; fi`,
                `echo written > ${marker} && cat ${marker} > ${out}/read`,
                `touch ${out}/first`,
                'sleep 2',
                'exit 1',
              ].join('; '),
            ),
          ],
        },
      })
      expect(await f.file('layer/read')).toBe('written\n')
      expect(existsSync(marker)).toBe(false)
      const uid = (await f.c.core.readNamespacedPod({namespace: f.ns, name: 'layer'})).metadata!.uid!
      expect(readFileSync(join(f.node.stateDir, 'pods', uid, 'layers', 'main', 'upper', marker), 'utf8')).toBe('written\n')
      expect(await f.file('layer/second', 40_000)).toBe('absent\n')
      expect(existsSync(marker)).toBe(false)
    } finally {
      rmSync(marker, {force: true})
    }
  })

  testWhen(process.getuid?.() === 0, 'it mounts two tmpfs of its own (root)')(
    'a host unix socket is reached only through a volume that mounts it: not on the root filesystem, not on a writable mount below it, not with readOnlyRootFilesystem; a read-only mount below is still seen',
    async () => {
      const dir = mkdtempSync('/tmp/vnode-sock-')
      const writable = join(dir, 'mnt')
      const readOnly = join(dir, 'ro')
      const mounted: string[] = []
      const servers: Server[] = []
      try {
        mkdirSync(writable)
        mkdirSync(readOnly)
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'vnode-sock-test', writable])
        mounted.push(writable)
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'vnode-sock-test', readOnly])
        mounted.push(readOnly)
        writeFileSync(join(readOnly, 'seen'), 'the read-only mount is seen\n')
        execFileSync('mount', ['-o', 'remount,ro', readOnly])
        const sockets = [join(dir, 'root.sock'), join(writable, 'sub.sock')]
        for (const p of sockets) servers.push(await listenAt(p))
        // The host reaches both: what the pods below do not is the walls' doing.
        // (Asynchronously: the sockets' server runs on this process's event loop.)
        const {stdout} = await promisify(execFile)('/bin/sh', ['-c', socketProbe(sockets)], {encoding: 'utf8'})
        expect(stdout.match(/CONNECTED hello from the host/g)).toHaveLength(2)
        const probe = (name: string, paths: string[], extra: Record<string, unknown> = {}, spec: Record<string, unknown> = {}) => {
          const out = f.out(name)
          return f.create({
            metadata: {name},
            spec: {
              terminationGracePeriodSeconds: 1,
              ...spec,
              containers: [shell('main', `mkdir -p ${out}; ${socketProbe(paths)} > ${out}/sockets; cat ${readOnly}/seen > ${out}/ro 2>&1; echo done > ${out}/done; while :; do sleep 1; done`, extra)],
            },
          })
        }
        await probe('sock', sockets)
        await probe('sock-ro', sockets, {securityContext: {readOnlyRootFilesystem: true}})
        await probe('sock-vol', ['/hostsock/root.sock'], {volumeMounts: [{name: 'sock', mountPath: '/hostsock'}]}, {volumes: [{name: 'sock', hostPath: {path: dir}}]})
        for (const name of ['sock', 'sock-ro']) {
          await f.file(`${name}/done`)
          const lines = readFileSync(f.out(`${name}/sockets`), 'utf8')
            .trim()
            .split('\n')
          expect(lines).toHaveLength(2)
          for (const l of lines) expect(l).toMatch(/ refused /)
          expect(readFileSync(f.out(`${name}/ro`), 'utf8')).toBe('the read-only mount is seen\n')
        }
        await f.file('sock-vol/done')
        expect(readFileSync(f.out('sock-vol/sockets'), 'utf8')).toBe('/hostsock/root.sock CONNECTED hello from the host\n')
      } finally {
        for (const s of servers) s.close()
        for (const m of mounted.reverse()) execFileSync('umount', [m])
        rmSync(dir, {recursive: true, force: true})
      }
    },
  )

  test('readOnlyRootFilesystem: the layer read-only, a write outside volumes fails with EROFS', async () => {
    const out = f.out('ro')
    await f.create({
      metadata: {name: 'ro'},
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          shell('main', `mkdir -p ${out}; touch /opt/vnode-ro 2> ${out}/opt; touch /tmp/vnode-ro-${f.ns} 2> ${out}/tmp; echo done > ${out}/done; while :; do sleep 1; done`, {
            securityContext: {readOnlyRootFilesystem: true},
          }),
        ],
      },
    })
    await f.file('ro/done')
    expect(readFileSync(join(out, 'opt'), 'utf8')).toContain('Read-only file system')
    expect(readFileSync(join(out, 'tmp'), 'utf8')).toContain('Read-only file system')
    expect(existsSync(`/tmp/vnode-ro-${f.ns}`)).toBe(false)
  })

  test("the layer's mount step runs the host's mount(8), never one found on the container's PATH", async () => {
    // A directory of the host any local user could fill (the host's /tmp), named first on the pod's PATH.
    const planted = mkdtempSync('/tmp/vnode-path-')
    const ran = join(planted, 'ran')
    try {
      writeFileSync(join(planted, 'mount'), `#!/bin/sh\ntouch ${ran}\nexec /usr/bin/mount "$@"\n`, {mode: 0o755})
      const out = f.out('path')
      await f.create({
        metadata: {name: 'path'},
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [shell('main', `mkdir -p ${out}; echo started > ${out}/done; while :; do sleep 1; done`, {env: [{name: 'PATH', value: `${planted}:/usr/sbin:/usr/bin:/sbin:/bin`}]})],
        },
      })
      expect(await f.file('path/done')).toBe('started\n')
      expect(existsSync(ran)).toBe(false)
    } finally {
      rmSync(planted, {recursive: true, force: true})
    }
  })

  test('the control plane CA key, the kubeconfig and another pod token are unreadable by absolute and relative path: main process, kubectl exec, kubectl cp', async () => {
    expect(readFileSync(caKey, 'utf8')).toContain('PRIVATE KEY')
    const secrets = [caKey, kubeconfigPath(), tokenPath]
    const out = f.out('hidden')
    const probes = secrets.flatMap((p) => [p, p.slice(1), `../../../../../../../../..${p}`])
    await f.create({
      metadata: {name: 'hidden'},
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [shell('main', `mkdir -p ${out}; cd /tmp; for p in ${probes.join(' ')}; do cat "$p" 2>/dev/null; done > ${out}/read; echo done > ${out}/done; while :; do sleep 1; done`)],
      },
    })
    await f.file('hidden/done')
    const seen = readFileSync(join(out, 'read'), 'utf8')
    const secretBits = [readFileSync(caKey, 'utf8').split('\n')[1]!, token, readFileSync(kubeconfigPath(), 'utf8').slice(0, 40)]
    for (const s of secretBits) expect(seen).not.toContain(s)
    for (const p of probes) {
      const r = await kubectl(['-n', f.ns, 'exec', 'hidden', '--', 'cat', p])
      expect({p, failed: r.exitCode !== 0}).toEqual({p, failed: true})
      for (const s of secretBits) expect(r.stdout).not.toContain(s)
    }
    const dir = mkdtempSync(join(runDir(), 'cp-'))
    for (const [i, p] of probes.entries()) {
      const local = join(dir, String(i))
      await kubectl(['-n', f.ns, 'cp', `hidden:${p}`, local])
      const got = existsSync(local) ? readFileSync(local, 'utf8') : ''
      for (const s of secretBits) expect(got).not.toContain(s)
    }
  })

  test('exec runs in the working directory of the container, in its root: pwd, relative paths, kubectl cp of a relative path', async () => {
    await f.create({metadata: {name: 'cwd'}, spec: {terminationGracePeriodSeconds: 1, containers: [shell('main', 'while :; do sleep 1; done', {workingDir: '/usr'})]}})
    await waitFor(async () => (await kubectl(['-n', f.ns, 'exec', 'cwd', '--', 'true'])).exitCode === 0, 'cwd running')
    const pwd = await kubectl(['-n', f.ns, 'exec', 'cwd', '--', 'sh', '-c', 'pwd; echo probe-content > cp-probe'])
    expect(pwd.stdout).toBe('/usr')
    expect(pwd.stderr).not.toContain('getcwd')
    const local = join(mkdtempSync(join(runDir(), 'cp-')), 'probe')
    const cp = await kubectl(['-n', f.ns, 'cp', 'cwd:cp-probe', local])
    expect(cp.exitCode).toBe(0)
    expect(readFileSync(local, 'utf8')).toBe('probe-content\n')
    // The write went to the container's layer, not the host's /usr.
    expect(existsSync('/usr/cp-probe')).toBe(false)
  })

  test("exec runs in the container's cgroup: its CPU is counted there and the limit applies", async () => {
    const marker = `walls-cpu-${f.ns}`
    await f.create({
      metadata: {name: 'cpu'},
      spec: {terminationGracePeriodSeconds: 1, containers: [shell('main', `while :; do sleep 1; done; echo ${marker}`, {resources: {limits: {cpu: '300m', memory: '64Mi'}}})]},
    })
    const [pid] = await waitFor(async () => {
      const found = await processesMatching(marker)
      return found.length > 0 ? found : undefined
    }, 'the container process')
    const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => /:cpuacct[,:]|:cpu,cpuacct:/.test(l) || l.split(':')[1]?.split(',').includes('cpuacct'))
    expect(line).toBeDefined()
    const usageFile = join('/sys/fs/cgroup/cpuacct', line!.split(':')[2]!, 'cpuacct.usage')
    const inside = await kubectl(['-n', f.ns, 'exec', 'cpu', '--', 'sh', '-c', 'cat /proc/self/cgroup; echo ---; cat /proc/1/cgroup'])
    const [mine, main] = inside.stdout.split('---')
    expect(mine!.trim()).toBe(main!.trim())
    const before = Number(readFileSync(usageFile, 'utf8'))
    const started = Date.now()
    await kubectl(['-n', f.ns, 'exec', 'cpu', '--', 'timeout', '2', 'sh', '-c', 'while :; do :; done'])
    const wall = (Date.now() - started) / 1000
    const used = (Number(readFileSync(usageFile, 'utf8')) - before) / 1e9
    expect(used).toBeGreaterThan(0.3)
    // 300m: at most 0.3 s of CPU per second of wall time (and a little for the shells).
    expect(used).toBeLessThan(0.3 * wall + 0.25)
  })

  test('exec -it: a terminal of the sandbox /dev/pts, job control, exit 3 is the exit code', async () => {
    await f.create({metadata: {name: 'tty'}, spec: {terminationGracePeriodSeconds: 1, containers: [shell('main', 'while :; do sleep 1; done')]}})
    await waitFor(async () => (await kubectl(['-n', f.ns, 'exec', 'tty', '--', 'true'])).exitCode === 0, 'tty running')
    await expectInteractiveShell(kubectlBin(), f.ns, 'tty')
  })
})
