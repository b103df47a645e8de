import {afterAll, beforeAll, expect} from '@jest/globals'
import {execa, execaSync} from 'execa'
import {generateKeyPairSync} from 'node:crypto'
import {chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, relative} from 'node:path'
import {cliPath, E2eEnv} from './env.mjs'
import {parseMountinfo, readMountinfo} from '../../src/emulator/runtime/sandbox/mountinfo.js'
import {topmostBelow} from '../../src/emulator/runtime/sandbox/root-layer.js'
import {expectInteractiveShell} from './tty-exec.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, runDir, testWhen, uniqueName, VnodeProcess, waitFor} from './helpers.js'

/** nobody:nogroup on Debian. */
const Nobody = 65534
const isRoot = process.getuid?.() === 0
/** As root the node runs as nobody, the way a user without privileges runs it; otherwise as this user. */
const asUser = isRoot ? ['setpriv', `--reuid=${Nobody}`, `--regid=${Nobody}`, '--clear-groups', '--'] : []

/** Whether that user can start this CLI (its files, node_modules and node itself readable to it). */
function userCanRun(cli: string): boolean {
  const [file, ...args] = [...asUser, process.execPath, cli, '--version']
  return execaSync(file, args, {reject: false, cwd: tmpdir(), env: {PATH: process.env.PATH, HOME: tmpdir()}, extendEnv: false}).exitCode === 0
}

/**
 * The CLI as that user runs it: this checkout's, or, for a checkout in a
 * directory that user cannot enter (a 0700 home), a copy of what the CLI
 * runs from, hard links (no data copied) in a directory it can enter.
 */
function unprivilegedCli(): {cli: string; copy?: string} | {why: string} {
  if (!isRoot || userCanRun(cliPath())) return {cli: cliPath()}
  const checkout = dirname(dirname(cliPath()))
  const copy = mkdtempSync(join(tmpdir(), 'vnode-unpriv-cli-'))
  chmodSync(copy, 0o755)
  const linked = ['bin', 'dist', 'node_modules', 'package.json'].map((p) => execaSync('cp', ['-al', join(checkout, p), join(copy, p)], {reject: false}))
  const failed = linked.find((r) => r.exitCode !== 0)
  const cli = join(copy, 'bin', 'kubectl-vnode')
  if (!failed && userCanRun(cli)) return {cli, copy}
  rmSync(copy, {recursive: true, force: true})
  return {
    why: `uid ${Nobody} cannot run ${cliPath()} (${process.execPath}), nor a hard-linked copy of it in ${tmpdir()}: ${failed ? failed.stderr : 'its files or node are not readable by other users'}`,
  }
}

/** What that user can do on the host itself, outside any sandbox (what only the walls keep a pod from). */
function asNodeUser(cmd: string[]) {
  const [file, ...args] = [...asUser, ...cmd]
  return execa(file!, args, {reject: false, cwd: tmpdir(), env: {PATH: process.env.PATH}, extendEnv: false})
}

/**
 * A directory the writable layer covers on this host: without privileges a
 * top-level directory with host mounts below it is read-only (docs/SECURITY.md),
 * so a marker goes in one without (/tmp has mounts below it while another
 * cluster runs, say).
 */
function layeredDir(): string {
  const mounts = parseMountinfo(readMountinfo()).map((m) => m.point)
  const layered = ['/tmp', '/var', '/opt', '/srv'].find((d) => existsSync(d) && topmostBelow([d], mounts).length === 0)
  if (!layered) throw new Error('no top-level directory without mounts below it to test the layer in')
  return layered === '/tmp' ? tmpdir() : layered
}

/** A shell container (the host's sh, the image map's `sh`). */
function shell(script: string, extra: Record<string, unknown> = {}) {
  return {name: 'main', image: 'sh', command: ['/bin/sh', '-c', script], ...extra}
}

const Forever = 'trap "exit 0" TERM; while :; do sleep 1; done'

/**
 * The pod sandbox without privileges: bubblewrap makes a user namespace
 * where the host allows one, so `--sandbox auto` gives an unprivileged user
 * the same mount, PID and UTS namespaces as root gets (no cgroups, no pod
 * network: those need root). One node for every test below, started by the
 * first that runs and stopped by the last.
 */
describeE2e('the pod sandbox for a user without privileges (user namespaces)', () => {
  let c: Clients
  let home: string
  let node: VnodeProcess | undefined
  let started: Promise<VnodeProcess> | undefined
  const name = uniqueName('unpriv')
  const ns = uniqueName('unpriv')
  /** Another namespace, whose pod's service account token no pod of `ns` may read. */
  const otherNs = uniqueName('unpriv-other')
  /** A namespace where PodSecurity enforces the restricted level. */
  const restricted = uniqueName('unpriv-restricted')
  const unprivileged = unprivilegedCli()
  const cli = 'cli' in unprivileged ? unprivileged.cli : cliPath()
  /** Who the node runs as: every container's user and group. */
  const uid = isRoot ? Nobody : process.getuid!()
  const gid = isRoot ? Nobody : process.getgid!()
  /** That user's own local control plane, where `cluster up` run by it puts its dir by default (in vnode's state base). */
  const ownCaKey = () => join(home, '.local', 'state', 'kubectl-vnode', 'cluster', 'pki', 'ca.key')
  // Skipped (CI: failed) only where neither this checkout nor a hard-linked copy of it can be run by that user.
  const unprivTest = testWhen('cli' in unprivileged, 'why' in unprivileged ? unprivileged.why : '')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    await createNamespace(c.core, otherNs)
    await c.core.createNamespace({body: {metadata: {name: restricted, labels: {'pod-security.kubernetes.io/enforce': 'restricted'}}}})
    await waitFor(() => c.core.readNamespacedServiceAccount({name: 'default', namespace: restricted}), `the default service account in ${restricted}`, 30_000, 100)
    home = mkdtempSync(join(tmpdir(), 'vnode-unpriv-'))
    copyFileSync(kubeconfigPath(), join(home, 'kubeconfig'))
    chmodSync(home, 0o700)
    chmodSync(join(home, 'kubeconfig'), 0o600)
    // A CA key of that user's own control plane (a fresh key, never the e2e cluster's), 0600 in 0700 dirs of that user.
    mkdirSync(dirname(ownCaKey()), {recursive: true, mode: 0o700})
    writeFileSync(ownCaKey(), generateKeyPairSync('ec', {namedCurve: 'prime256v1'}).privateKey.export({type: 'pkcs8', format: 'pem'}), {mode: 0o600})
    const owned = [home, join(home, 'kubeconfig')]
    for (let p = ownCaKey(); p !== home; p = dirname(p)) owned.push(p)
    if (isRoot) for (const p of owned) chownSync(p, Nobody, Nobody)
  })
  afterAll(async () => {
    await node?.stop('SIGTERM', 40_000).catch(() => node?.stop('SIGKILL'))
    await deleteNamespace(c.core, ns)
    await deleteNamespace(c.core, otherNs)
    await deleteNamespace(c.core, restricted)
    await c.core.deleteNode({name}).catch(() => undefined)
    rmSync(home, {recursive: true, force: true})
    if ('copy' in unprivileged && unprivileged.copy) rmSync(unprivileged.copy, {recursive: true, force: true})
  })

  /** The node, started once (from its home: the test's working directory may be one that user cannot enter). */
  function up(): Promise<VnodeProcess> {
    started ??= (async () => {
      const stateDir = join(home, 'state')
      mkdirSync(stateDir, {mode: 0o700})
      if (isRoot) chownSync(stateDir, Nobody, Nobody)
      const [file, ...args] = [...asUser, process.execPath, cli, 'up', '--name', name, '--no-tui', '-o', 'json', '--state-dir', stateDir, '--port', '0']
      const child = execa(file!, args, {
        cwd: home,
        env: {PATH: process.env.PATH, HOME: home, KUBECONFIG: join(home, 'kubeconfig')},
        extendEnv: false,
        reject: false,
        buffer: false,
        forceKillAfterDelay: false,
      })
      node = new VnodeProcess(name, stateDir, child)
      await node.ready()
      return node
    })()
    return started
  }

  /** A pod's output, once it says what `done` waits for. */
  async function logsWhen(pod: string, namespace: string, done: (out: string) => boolean, what: string, timeoutMs = 30_000): Promise<string> {
    return waitFor(
      async () => {
        const r = await kubectl(['logs', '-n', namespace, pod])
        return r.exitCode === 0 && done(r.stdout) ? r.stdout : undefined
      },
      what,
      timeoutMs,
      300,
    )
  }

  /** A container's waiting state, once it has this reason. */
  async function waitingReason(pod: string, reason: string, what: string) {
    return waitFor(
      async () => {
        const w = (await c.core.readNamespacedPod({namespace: ns, name: pod})).status?.containerStatuses?.[0]?.state?.waiting
        return w?.reason === reason ? w : undefined
      },
      what,
      30_000,
      300,
    )
  }

  unprivTest(
    'auto picks the sandbox: PID 1, the pod hostname, a ConfigMap at its real path; a write stays in the layer, the kubeconfig hidden; its own user only',
    async () => {
      await up()
      const labels = (await c.core.readNode({name})).metadata?.labels ?? {}
      expect(labels['vnode.dev/sandbox']).toBe('namespaces')
      expect(labels['vnode.dev/cgroups']).toBe('none')
      await c.core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'app'}, data: {'app.conf': 'level=debug'}}})
      const marker = join(layeredDir(), `vnode-unpriv-layer-${ns}`)
      const kubeconfig = join(home, 'kubeconfig')
      // The walls without privileges: a write outside volumes stays in the layer (overlayfs in the user namespace), the kubeconfig is hidden.
      const walls = `const layer = (() => { try { fs.writeFileSync(${JSON.stringify(marker)}, 'x'); return fs.readFileSync(${JSON.stringify(marker)}, 'utf8') } catch (e) { return e.code } })(); const kubeconfig = (() => { try { return fs.readFileSync(${JSON.stringify(kubeconfig)}, 'utf8').length } catch (e) { return e.code } })();`
      const script =
        "const fs = require('fs'); " +
        walls +
        " console.log(JSON.stringify({pid: process.pid, host: require('os').hostname(), conf: fs.readFileSync('/etc/app/app.conf', 'utf8'), uid: process.getuid(), layer, kubeconfig})); process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000)"
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'app'},
          spec: {
            nodeName: name,
            hostname: 'web',
            automountServiceAccountToken: false,
            volumes: [{name: 'conf', configMap: {name: 'app'}}],
            containers: [{name: 'main', image: 'node', command: [process.execPath, '-e', script], volumeMounts: [{name: 'conf', mountPath: '/etc/app'}]}],
          },
        },
      })
      const out = await waitFor(
        async () => {
          const r = await kubectl(['logs', '-n', ns, 'app'])
          return r.exitCode === 0 && r.stdout.trim() ? r.stdout.trim() : undefined
        },
        'the pod to print what it sees',
        30_000,
        300,
      )
      try {
        expect(JSON.parse(out)).toEqual({pid: 1, host: 'web', conf: 'level=debug', uid: isRoot ? Nobody : process.getuid!(), layer: 'x', kubeconfig: 0})
        expect(existsSync(marker)).toBe(false)
        expect((await up()).stderr).not.toContain('no writable layer')
        // exec joins the container's namespaces (through the layer's user namespace), its root and working directory.
        const pwd = await kubectl(['exec', '-n', ns, 'app', '--', 'sh', '-c', `pwd; hostname; cat ${kubeconfig} | wc -c`])
        expect(pwd).toMatchObject({exitCode: 0, stdout: '/\nweb\n0'})
      } finally {
        rmSync(marker, {force: true})
      }
      // The walls of an unprivileged node: its user only, and a spec asking for another waits with the reason.
      const wallList = (await c.core.readNode({name})).metadata?.annotations?.['vnode.dev/walls'] ?? ''
      expect(wallList.split(',')).toEqual(expect.arrayContaining(['mount', 'pid', 'no-new-privs', `user-${uid}-only`, 'writable-layer', 'hidden-paths']))
      expect(wallList.split(',')).not.toContain('capabilities')
      const status = 'id -u; grep -E "^(CapEff|NoNewPrivs)" /proc/self/status'
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'who'},
          spec: {
            nodeName: name,
            restartPolicy: 'Never',
            automountServiceAccountToken: false,
            containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', status], securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}}}],
          },
        },
      })
      const other = uid === 1000 ? 1001 : 1000
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'other-user'},
          spec: {nodeName: name, automountServiceAccountToken: false, securityContext: {runAsUser: other}, containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', 'sleep 30']}]},
        },
      })
      const who = await waitFor(
        async () => {
          const r = await kubectl(['logs', '-n', ns, 'who'])
          return r.exitCode === 0 && r.stdout.includes('NoNewPrivs') ? r.stdout : undefined
        },
        'the pod to print its identity',
        30_000,
        300,
      )
      expect(who.split('\n')[0]).toBe(String(uid))
      expect(who).toMatch(/^CapEff:\s*0000000000000000$/m)
      expect(who).toMatch(/^NoNewPrivs:\s*1$/m)
      const waiting = await waitFor(
        async () => {
          const w = (await c.core.readNamespacedPod({namespace: ns, name: 'other-user'})).status?.containerStatuses?.[0]?.state?.waiting
          return w?.reason === 'CreateContainerConfigError' ? w : undefined
        },
        'the other user to be refused',
        30_000,
        300,
      )
      expect(waiting.reason).toBe('CreateContainerConfigError')
      expect(waiting.message).toMatch(new RegExp(`^runAsUser ${other} cannot be honoured on this node: vnode runs as uid ${uid}`))
      // readOnlyRootFilesystem: no layer, a write outside volumes fails with EROFS (here too, not only as root).
      const roMarker = join(layeredDir(), `vnode-unpriv-ro-${ns}`)
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'ro'},
          spec: {
            nodeName: name,
            restartPolicy: 'Never',
            automountServiceAccountToken: false,
            containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', `touch ${roMarker}; echo rc=$?`], securityContext: {readOnlyRootFilesystem: true}}],
          },
        },
      })
      // runAsNonRoot with runAsUser 0: refused with the kubelet's message before anything else is looked at.
      const refused = await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'nonroot'},
          spec: {
            nodeName: name,
            automountServiceAccountToken: false,
            securityContext: {runAsNonRoot: true, runAsUser: 0},
            containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', 'sleep 30']}],
          },
        },
      })
      const ro = await waitFor(
        async () => {
          const r = await kubectl(['logs', '-n', ns, 'ro'])
          return r.exitCode === 0 && r.stdout.includes('rc=') ? r.stdout : undefined
        },
        'the read-only pod to try its write',
        30_000,
        300,
      )
      expect(ro).toMatch(/Read-only file system/)
      expect(ro).toMatch(/^rc=1$/m)
      expect(existsSync(roMarker)).toBe(false)
      const nonroot = await waitFor(
        async () => {
          const w = (await c.core.readNamespacedPod({namespace: ns, name: 'nonroot'})).status?.containerStatuses?.[0]?.state?.waiting
          return w?.reason === 'CreateContainerConfigError' ? w : undefined
        },
        'runAsNonRoot to be refused',
        30_000,
        300,
      )
      expect(nonroot.message).toBe(`container's runAsUser breaks non-root policy (pod: "nonroot_${ns}(${refused.metadata!.uid})", container: main)`)
    },
    90_000,
  )

  unprivTest(
    'a file written outside volumes is in the instance layer, not on the host, and gone after a restart (a new instance, a fresh layer)',
    async () => {
      const n = await up()
      const marker = join(layeredDir(), `vnode-unpriv-restart-${ns}`)
      // The first instance writes outside its volumes, then waits for the test to let it fail; the next one (the emptyDir outlives it) says what it sees.
      const script = [
        `if [ -e /scratch/first ]; then (test -e ${marker} && echo second-present || echo second-absent); ${Forever}; fi`,
        `echo written > ${marker} && echo first-$(cat ${marker})`,
        'touch /scratch/first',
        'while [ ! -e /scratch/go ]; do sleep 0.2; done',
        'exit 1',
      ].join('; ')
      try {
        const pod = await c.core.createNamespacedPod({
          namespace: ns,
          body: {
            metadata: {name: 'layer'},
            spec: {
              nodeName: name,
              terminationGracePeriodSeconds: 1,
              automountServiceAccountToken: false,
              volumes: [{name: 'scratch', emptyDir: {}}],
              containers: [shell(script, {volumeMounts: [{name: 'scratch', mountPath: '/scratch'}]})],
            },
          },
        })
        await logsWhen('layer', ns, (out) => out.includes('first-written'), 'the first instance to write')
        expect(existsSync(marker)).toBe(false)
        const upper = join(n.stateDir, 'pods', pod.metadata!.uid!, 'layers', 'main', 'upper', marker)
        expect(readFileSync(upper, 'utf8')).toBe('written\n')
        expect(await kubectl(['exec', '-n', ns, 'layer', '--', 'touch', '/scratch/go'])).toMatchObject({exitCode: 0})
        const second = await logsWhen('layer', ns, (out) => /^second-/m.test(out), 'the next instance to look', 60_000)
        expect(second.trim()).toBe('second-absent')
        const status = await waitFor(
          async () => {
            const s = (await c.core.readNamespacedPod({namespace: ns, name: 'layer'})).status?.containerStatuses?.[0]
            return s?.restartCount === 1 && s.state?.running ? s : undefined
          },
          'the restart in the status',
          30_000,
          300,
        )
        expect(status.lastState?.terminated?.exitCode).toBe(1)
        expect(existsSync(marker)).toBe(false)
        // What the replaced instance wrote is gone with its layer.
        await waitFor(() => !existsSync(upper), "the first instance's layer to be discarded", 30_000, 300)
      } finally {
        rmSync(marker, {force: true})
      }
    },
    150_000,
  )

  unprivTest(
    'the control plane CA keys, the kubeconfig and another pod token are unreadable by absolute and relative path: main process, kubectl exec, kubectl cp',
    async () => {
      const n = await up()
      // A pod of another namespace, with its service account token (a file of that user on the host, in the node's state dir).
      await c.core.createNamespacedPod({namespace: otherNs, body: {metadata: {name: 'holder'}, spec: {nodeName: name, terminationGracePeriodSeconds: 1, containers: [shell(Forever)]}}})
      const holder = (await c.core.readNamespacedPod({namespace: otherNs, name: 'holder'})).metadata!.uid!
      const tokenPath = await waitFor(
        () => {
          const vols = join(n.stateDir, 'pods', holder, 'volumes')
          const dir = existsSync(vols) ? readdirSync(vols).find((v) => v.startsWith('kube-api-access')) : undefined
          const p = dir && join(vols, dir, 'token')
          return p && existsSync(p) ? p : undefined
        },
        "the other pod's token",
        30_000,
        300,
      )
      const e2eCaKey = join(dirname(kubeconfigPath()), 'pki', 'ca.key')
      const kubeconfig = join(home, 'kubeconfig')
      const secrets = [e2eCaKey, ownCaKey(), kubeconfig, tokenPath]
      const text = (p: string) => readFileSync(p, 'utf8')
      expect(text(e2eCaKey)).toContain('PRIVATE KEY')
      // What would show that one was read: a key's first base64 line, the kubeconfig's longest line (its credentials), the token.
      const bits = [
        text(e2eCaKey).split('\n')[1]!,
        text(ownCaKey()).split('\n')[1]!,
        text(kubeconfig)
          .split('\n')
          .reduce((a, b) => (b.length > a.length ? b : a)),
        text(tokenPath),
      ]
      // Those of that user are readable by it on the host: only the walls keep them from its pods. (The e2e cluster's CA key is
      // also out of its reach on the host: the run dir is root's, 0700.)
      for (const p of [ownCaKey(), kubeconfig, tokenPath]) {
        const r = await asNodeUser(['cat', p])
        expect({p, exitCode: r.exitCode, read: r.stdout.length > 0}).toEqual({p, exitCode: 0, read: true})
      }
      // From the container's working directory (an emptyDir): each path as given, relative, and through `..` up to `/`.
      const cwd = '/scratch'
      const probes = secrets.flatMap((p) => [p, relative(cwd, p), `../../../../../../../..${p}`])
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'hidden'},
          spec: {
            nodeName: name,
            terminationGracePeriodSeconds: 1,
            automountServiceAccountToken: false,
            volumes: [{name: 'scratch', emptyDir: {}}],
            containers: [
              shell(`echo control-content > control; for p in ${probes.join(' ')}; do cat "$p" 2>/dev/null; done; echo probes-done; ${Forever}`, {
                workingDir: cwd,
                volumeMounts: [{name: 'scratch', mountPath: cwd}],
              }),
            ],
          },
        },
      })
      const seen = await logsWhen('hidden', ns, (out) => out.includes('probes-done'), 'the main process to try every path')
      for (const b of bits) expect(seen).not.toContain(b)
      expect(seen.trim()).toBe('probes-done')
      // exec and cp do reach the container's own files, by relative path too: what they do not read is hidden, not unreachable.
      expect(await kubectl(['exec', '-n', ns, 'hidden', '--', 'cat', 'control'])).toMatchObject({exitCode: 0, stdout: 'control-content'})
      for (const p of probes) {
        const r = await kubectl(['exec', '-n', ns, 'hidden', '--', 'cat', p])
        for (const b of bits) expect(r.stderr).not.toContain(b)
        expect({p, stdout: r.stdout}).toEqual({p, stdout: ''})
      }
      const dir = mkdtempSync(join(runDir(), 'unpriv-cp-'))
      try {
        expect(await kubectl(['-n', ns, 'cp', 'hidden:control', join(dir, 'control')])).toMatchObject({exitCode: 0})
        expect(readFileSync(join(dir, 'control'), 'utf8')).toBe('control-content\n')
        for (const [i, p] of probes.entries()) {
          const local = join(dir, String(i))
          await kubectl(['-n', ns, 'cp', `hidden:${p}`, local])
          const got = existsSync(local) && statSync(local).isFile() ? readFileSync(local, 'utf8') : ''
          expect({p, copied: bits.filter((b) => got.includes(b)).length}).toEqual({p, copied: 0})
        }
      } finally {
        rmSync(dir, {recursive: true, force: true})
      }
    },
    150_000,
  )

  unprivTest(
    "fsGroup: the node's own group is applied to an emptyDir (its group, setgid); another group waits in CreateContainerConfigError with a Failed event",
    async () => {
      await up()
      const foreign = gid === 2000 ? 2001 : 2000
      const emptyDir = {volumes: [{name: 'data', emptyDir: {}}]}
      const mounted = {volumeMounts: [{name: 'data', mountPath: '/data'}]}
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'fsgroup'},
          spec: {
            nodeName: name,
            restartPolicy: 'Never',
            automountServiceAccountToken: false,
            securityContext: {fsGroup: gid},
            ...emptyDir,
            containers: [shell("stat -c 'data %g %A' /data; touch /data/f && stat -c 'file %u %g' /data/f", mounted)],
          },
        },
      })
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'fsgroup-other'},
          // With volumes fsGroup applies to (an emptyDir, the automounted token): the refusal still names the field, never a mount's EPERM.
          spec: {nodeName: name, securityContext: {fsGroup: foreign}, ...emptyDir, containers: [shell('sleep 30', mounted)]},
        },
      })
      const out = await logsWhen('fsgroup', ns, (o) => /^file /m.test(o), 'the fsGroup pod to print its volume')
      expect(out).toMatch(new RegExp(`^data ${gid} drwxrwsrwx$`, 'm'))
      expect(out).toMatch(new RegExp(`^file ${uid} ${gid}$`, 'm'))
      const waiting = await waitingReason('fsgroup-other', 'CreateContainerConfigError', 'the other group to be refused')
      expect(waiting.message).toMatch(
        new RegExp(
          `^supplementary groups ${foreign} \\(fsGroup, supplementalGroups\\) cannot be honoured on this node: vnode runs as uid ${uid}, and its user namespace maps only that user \\(walls: `,
        ),
      )
      const event = await waitFor(
        async () => (await c.core.listNamespacedEvent({namespace: ns, fieldSelector: 'involvedObject.name=fsgroup-other'})).items.find((e) => e.reason === 'Failed'),
        'the Failed event',
        30_000,
        300,
      )
      expect(event.type).toBe('Warning')
      expect(event.message).toBe(`Error: ${waiting.message}`)
    },
    90_000,
  )

  unprivTest(
    'a pod PodSecurity restricted admits runs as the node user, and every write outside its emptyDir stays off the host',
    async () => {
      await up()
      const marker = `vnode-unpriv-restricted-${restricted}`
      const places = [...new Set(['/tmp', tmpdir(), '/var/tmp', '/dev/shm', '/opt', '/etc', '/usr/local', '/root', home, runDir()])]
      const markers = places.map((p) => join(p, marker))
      // Where that user may write on the host (its home, /tmp): there only the walls keep the pod's writes off the host.
      const writable = await Promise.all(places.map(async (p) => ((await asNodeUser(['test', '-w', p])).exitCode === 0 ? p : undefined)))
      expect(writable).toEqual(expect.arrayContaining(['/tmp', home]))
      const script = [...markers.map((m) => `touch ${m} 2>/dev/null && echo wrote ${m}`), 'touch /scratch/kept && echo volume-ok', 'id -u'].join('; ')
      try {
        // No hostPath out dir: PodSecurity restricted refuses one.
        await c.core.createNamespacedPod({
          namespace: restricted,
          body: {
            metadata: {name: 'restricted'},
            spec: {
              nodeName: name,
              restartPolicy: 'Never',
              securityContext: {runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}},
              volumes: [{name: 'scratch', emptyDir: {}}],
              containers: [shell(script, {securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}}, volumeMounts: [{name: 'scratch', mountPath: '/scratch'}]})],
            },
          },
        })
        const phase = await waitFor(
          async () => {
            const p = (await c.core.readNamespacedPod({namespace: restricted, name: 'restricted'})).status?.phase
            return p === 'Succeeded' || p === 'Failed' ? p : undefined
          },
          'the restricted pod to finish',
          30_000,
          300,
        )
        expect(phase).toBe('Succeeded')
        const out = (await kubectl(['logs', '-n', restricted, 'restricted'])).stdout
        expect(out).toMatch(/^volume-ok$/m)
        expect(out.trim().split('\n').at(-1)).toBe(String(uid))
        expect(markers.filter((m) => existsSync(m))).toEqual([])
      } finally {
        for (const m of markers) rmSync(m, {force: true})
      }
    },
    90_000,
  )

  unprivTest(
    'exec -it: a terminal of the sandbox /dev/pts, job control, exit 3 is the exit code',
    async () => {
      await up()
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {metadata: {name: 'tty'}, spec: {nodeName: name, terminationGracePeriodSeconds: 1, automountServiceAccountToken: false, containers: [shell(Forever)]}},
      })
      await waitFor(async () => (await kubectl(['-n', ns, 'exec', 'tty', '--', 'true'])).exitCode === 0, 'tty running', 30_000, 300)
      await expectInteractiveShell(join(process.env[E2eEnv.binDir]!, 'kubectl'), ns, 'tty')
    },
    90_000,
  )

  unprivTest(
    'the node stops cleanly, its pods with it',
    async () => {
      const n = await up()
      expect(await n.stop()).toBe(0)
      node = undefined
    },
    90_000,
  )
})
