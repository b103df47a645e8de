import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa, execaSync} from 'execa'
import {accessSync, chmodSync, chownSync, constants, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync} from 'node:fs'
import {type AddressInfo, createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {cliPath} from '../env.mjs'
import {clients, createNamespace, deleteNamespace, describeHolding, kubeconfigPath, startVnode, stopAllVnodes, testWhen, uniqueName, waitFor} from '../helpers.js'
import {freePort, hasIptables, Reject} from '../relay-helpers.js'

interface Check {
  id: string
  capability: string
  verdict: 'ok' | 'missing' | 'off'
  why: string
  cost?: string
  fix?: {text?: string; command?: string; byFamily?: Record<string, string>}
  unmet?: boolean
}
interface Report {
  host: {os: string; family?: string; uid: number}
  cluster?: {server?: string; reachable: boolean; version?: string}
  checks: Check[]
  mode: string
  ok: boolean
}

const Nobody = 65534
const isRoot = process.getuid?.() === 0
const onPath = (name: string) =>
  (process.env.PATH ?? '').split(delimiter).some((d) => {
    try {
      accessSync(join(d, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  })
const CniPlugins = ['bridge', 'host-local', 'loopback', 'portmap']
/** What "everything present" means: root, bubblewrap, nsenter, the CNI plugins, iptables. */
const missingHere = [
  ...(isRoot ? [] : ['root']),
  ...['bwrap', 'nsenter', 'iptables'].filter((p) => !onPath(p)),
  ...CniPlugins.filter((p) => !existsSync(join('/usr/lib/cni', p))).map((p) => `/usr/lib/cni/${p}`),
]
const asNobody = ['setpriv', `--reuid=${Nobody}`, `--regid=${Nobody}`, '--clear-groups', '--']
/** Whether uid 65534 can run this checkout's CLI (a checkout under a 0700 home cannot be). */
const nobodyCanRun = isRoot && execaSync(asNobody[0], [...asNobody.slice(1), process.execPath, '-e', `require('fs').accessSync(${JSON.stringify(cliPath())}, 5)`], {reject: false}).exitCode === 0

/**
 * `kubectl vnode doctor` through the real binary, on this host as it is, with
 * a PATH that lacks bubblewrap, and as a user without privileges; against the
 * run's control plane (on loopback, without cluster services).
 */
describeHolding(['network', 'kubelet-port'])('kubectl vnode doctor', () => {
  // Made in beforeAll, not when the file is collected: a run that filters out every test here runs no afterAll to remove it.
  let dir = ''
  let dnsService = false
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vnode-doctor-e2e-'))
    // uid 65534 passes through to its own home below.
    chmodSync(dir, 0o711)
    const c = await clients()
    dnsService = await c.core.readNamespacedService({name: 'kube-dns', namespace: 'kube-system'}).then(
      () => true,
      () => false,
    )
  })
  afterAll(async () => {
    await stopAllVnodes()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const doctor = async (args: string[], opts: {env?: NodeJS.ProcessEnv; prefix?: string[]} = {}) => {
    const [file, ...rest] = [...(opts.prefix ?? []), process.execPath, cliPath(), 'doctor', ...args]
    const r = await execa(file, rest, {env: opts.env ?? {...process.env, KUBECONFIG: kubeconfigPath()}, extendEnv: false, reject: false, timeout: 60_000})
    return {exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr}
  }
  const json = async (args: string[], opts?: Parameters<typeof doctor>[1]) => {
    const r = await doctor(['-o', 'json', ...args], opts)
    const report = JSON.parse(r.stdout) as Report
    const byId = Object.fromEntries(report.checks.map((c) => [c.id, c]))
    return {...r, report, byId}
  }

  testWhen(missingHere.length === 0, `doctor on a capable host needs ${missingHere.join(', ')}`)(
    'this host: everything ok, the pod network off on loopback until asked for, and the cluster seen',
    async () => {
      const {exitCode, report, byId} = await json([])
      expect(exitCode).toBe(0)
      expect(report.ok).toBe(true)
      expect(report.host.uid).toBe(0)
      for (const id of ['sandbox', 'walls', 'cgroups', 'kubelet-port', 'cluster', 'relay']) expect([id, byId[id].verdict, byId[id].why]).toEqual([id, 'ok', expect.any(String)])
      expect(byId.walls.why).toBe('mount,pid,ipc,uts,no-new-privs,proc-masks,users,capabilities,read-only-root,writable-layer,hidden-paths')
      expect(byId.cgroups.why).toMatch(/^cgroup v[12]: limits enforced/)
      expect(byId['pod-network']).toMatchObject({verdict: 'off', fix: {command: 'kubectl vnode up --pod-network on'}})
      expect(byId.cluster.why).toMatch(/^https:\/\/127\.0\.0\.1:\d+ \(Kubernetes v1\.\d+\.\d+\)/)
      expect(byId.relay.why).toMatch(/^not needed/)
      // The run's control plane has no cluster services (--no-services).
      expect(byId.services.verdict).toBe(dnsService ? 'ok' : 'missing')
      if (!dnsService) expect(byId.services.why).toBe('no kube-dns Service in kube-system')
      expect(byId.metrics).toMatchObject({verdict: 'missing', why: expect.stringContaining('metrics-server is not installed')})
      expect(report.mode).toMatch(
        /^mode: sandbox namespaces, cgroups v[12], pod network off; walls mount,pid,ipc,uts,no-new-privs,proc-masks,users,capabilities,read-only-root,writable-layer,hidden-paths$/,
      )

      const on = await json(['--pod-network', 'on', '--sandbox', 'namespaces'])
      expect(on).toMatchObject({exitCode: 0, report: {ok: true}})
      expect(on.byId['pod-network'].verdict).toBe('ok')
      expect(on.report.mode).toMatch(/pod network on;/)

      const text = await doctor([])
      expect(text.exitCode).toBe(0)
      expect(text.stdout).toMatch(/^host: .+, uid 0$/m)
      expect(text.stdout).toMatch(/^pod sandbox +ok +mount, PID and UTS namespaces \(bubblewrap\)$/m)
      expect(text.stdout).toMatch(/^pod network +off +this host allows it, but auto leaves it off: the API server is on loopback/m)
      expect(text.stdout).toMatch(/^ +fix: ask for it$/m)
      expect(text.stdout).toMatch(/^ +kubectl vnode up --pod-network on$/m)
      expect(text.stdout.trimEnd().split('\n').at(-1)).toBe(report.mode)
    },
  )

  testWhen(isRoot && onPath('bwrap'), 'a PATH without bwrap is only a test where bwrap is there to leave out, run as root')(
    'PATH without bwrap: the sandbox, walls and pod network missing, with the install command; --sandbox namespaces exits 1',
    async () => {
      // Every program on PATH but bwrap, as symlinks in a directory of the test's own.
      const bin = join(dir, 'bin-without-bwrap')
      mkdirSync(bin, {recursive: true})
      for (const d of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
        const names = (() => {
          try {
            return readdirSync(d)
          } catch {
            return []
          }
        })()
        for (const n of names) if (n !== 'bwrap' && !existsSync(join(bin, n))) symlinkSync(join(d, n), join(bin, n))
      }
      const env = {...process.env, PATH: bin, KUBECONFIG: kubeconfigPath()}
      expect(execaSync('sh', ['-c', 'command -v bwrap'], {env, extendEnv: false, reject: false}).exitCode).not.toBe(0)
      const {exitCode, report, byId} = await json([], {env})
      expect(exitCode).toBe(0)
      expect(byId.sandbox).toMatchObject({verdict: 'missing', why: 'bwrap (bubblewrap) is not installed', unmet: false})
      expect(byId.sandbox.fix!.byFamily).toEqual({debian: 'apt-get install -y bubblewrap', fedora: 'dnf install -y bubblewrap', arch: 'pacman -S --needed bubblewrap'})
      expect(byId.walls).toMatchObject({verdict: 'missing', fix: {byFamily: {debian: 'apt-get install -y bubblewrap'}}})
      expect(byId['pod-network']).toMatchObject({verdict: 'missing', why: expect.stringMatching(/^pods run without namespaces/), fix: {byFamily: {debian: 'apt-get install -y bubblewrap'}}})
      expect(byId.cgroups.verdict).toBe('ok')
      expect(report.mode).toMatch(/^mode: sandbox none, cgroups v[12], pod network off; walls user-0-only$/)

      const asked = await doctor(['--sandbox', 'namespaces'], {env})
      expect(asked.exitCode).toBe(1)
      expect(asked.stdout).toMatch(/^pod sandbox +missing +bwrap \(bubblewrap\) is not installed \(asked for: cannot work\)$/m)
      if (report.host.family === 'debian') expect(asked.stdout).toMatch(/^ +fix: apt-get install -y bubblewrap$/m)
      expect(asked.stdout).toMatch(/^ +without it: pods run as bare host processes/m)
    },
  )

  testWhen(nobodyCanRun, isRoot ? `uid ${Nobody} cannot read ${cliPath()} (put the checkout where that user can read it)` : 'running as another user needs root (setpriv)')(
    `unprivileged (uid ${Nobody}): the sandbox in a user namespace, one user only, no cgroups, no pod network; root is the fix`,
    async () => {
      const home = join(dir, 'nobody')
      mkdirSync(home, {mode: 0o700})
      copyFileSync(kubeconfigPath(), join(home, 'kubeconfig'))
      chmodSync(join(home, 'kubeconfig'), 0o600)
      for (const p of [home, join(home, 'kubeconfig')]) chownSync(p, Nobody, Nobody)
      const env = {PATH: process.env.PATH, HOME: home, KUBECONFIG: join(home, 'kubeconfig')}
      const {exitCode, report, byId} = await json([], {env, prefix: asNobody})
      expect(exitCode).toBe(0)
      expect(report.host.uid).toBe(Nobody)
      expect(byId.cluster.verdict).toBe('ok')
      if (byId.sandbox.verdict === 'ok') {
        expect(byId.sandbox.why).toBe('mount, PID and UTS namespaces (bubblewrap, in a user namespace)')
        expect(byId.walls).toMatchObject({verdict: 'missing', why: expect.stringContaining(`only uid ${Nobody}`), fix: {text: expect.stringContaining('run as root')}})
      } else {
        // A host that forbids unprivileged user namespaces: the sysctls, or root.
        expect(byId.sandbox.fix!.text).toContain('user namespaces')
      }
      expect(byId.cgroups).toMatchObject({verdict: 'missing', fix: {text: expect.stringContaining('root')}})
      expect(byId['pod-network']).toMatchObject({verdict: 'missing', fix: {text: expect.stringContaining('run as root')}})
      expect(byId['pod-network'].why).toMatch(byId.sandbox.verdict === 'ok' ? /^it needs root/ : /^pods run without namespaces/)
      expect(report.mode).toMatch(new RegExp(`cgroups none, pod network off; walls .*user-${Nobody}-only`))

      // Asked for, what needs root fails: exit 1, the reason on the row.
      const asked = await doctor(['--pod-network', 'on', '--cgroups', 'v1'], {env, prefix: asNobody})
      expect(asked.exitCode).toBe(1)
      expect(asked.stdout).toMatch(/^pod network +missing +.*\(asked for: cannot work\)$/m)
      expect(asked.stdout).toMatch(/^cgroups v1\/v2 +missing +.*\(asked for: cannot work\)$/m)
      expect(asked.stdout).toMatch(/^ +fix: run as root/m)
    },
  )

  test("up says doctor's mode line once at start, in place of its walls line", async () => {
    const {report} = await json(['--sandbox', 'auto'])
    const name = uniqueName('doctor-up')
    const node = startVnode(name, ['--sandbox', 'auto', '--rm'])
    await node.ready()
    await waitFor(
      () => node.stderr.includes(report.mode),
      () => `up to say ${report.mode} (it said: ${node.stderr})`,
      30_000,
      100,
    )
    expect(node.stderr.split('\n').filter((l) => l.startsWith('mode: '))).toEqual([report.mode])
    expect(node.stderr).not.toMatch(/^walls: /m)
    expect(await node.stop()).toBe(0)
  })

  testWhen(isRoot && hasIptables, 'the unreachable node is made with an iptables reject of its kubelet port: root and iptables are needed')(
    "a node the API server reaches is ok; one it cannot (--relay off, behind a firewall) is missing, naming the API server's error and the relay as the fix",
    async () => {
      const c = await clients()
      const reached = uniqueName('doctor-direct')
      const walled = uniqueName('doctor-walled')
      const direct = startVnode(reached, ['--rm'])
      await direct.ready()
      const hostIP = (await c.core.readNode({name: reached})).status!.addresses!.find((a) => a.type === 'InternalIP')!.address
      const port = await freePort()
      const reject = new Reject(hostIP, port, `vnode-doctor-test-${walled}`)
      reject.add()
      try {
        const node = startVnode(walled, ['--relay', 'off', '--port', String(port), '--rm'])
        await node.ready()
        const rows = (report: Report) => Object.fromEntries(report.checks.filter((k) => k.id === 'kubelet-endpoint').map((k) => [k.capability, k]))
        const named = await json(['--node', reached, '--node', walled])
        expect(named.exitCode).toBe(0)
        expect(Object.keys(rows(named.report))).toEqual([`node ${reached}`, `node ${walled}`])
        const directPort = (await c.core.readNode({name: reached})).status!.daemonEndpoints!.kubeletEndpoint!.Port
        expect(rows(named.report)[`node ${reached}`]).toMatchObject({verdict: 'ok', why: `the API server reaches its kubelet API at ${hostIP}:${directPort} directly`})
        const row = rows(named.report)[`node ${walled}`]
        expect(row).toMatchObject({verdict: 'missing', fix: {command: 'kubectl vnode up --relay on'}, cost: expect.stringMatching(/^kubectl logs, exec/)})
        expect(row.why).toMatch(new RegExp(`^the API server cannot reach ${hostIP.replaceAll('.', '\\.')}:${port}: .*connection refused`))
        // Without --node: every Ready vnode node of the cluster, these two among them.
        const all = rows((await json([])).report)
        expect(all[`node ${reached}`]?.verdict).toBe('ok')
        expect(all[`node ${walled}`]?.verdict).toBe('missing')
        const text = await doctor(['--node', walled])
        expect(text.stdout).toMatch(new RegExp(`^node ${walled} +missing +the API server cannot reach ${hostIP.replaceAll('.', '\\.')}:${port}: `, 'm'))
        expect(text.stdout).toMatch(/^ +kubectl vnode up --relay on$/m)
        expect(await doctor(['--node', uniqueName('no-such-node')])).toMatchObject({exitCode: 1, stderr: expect.stringMatching(/^error: nodes "no-such-node-\S+" not found$/)})
        expect(await node.stop()).toBe(0)
      } finally {
        reject.remove()
      }
      expect(await direct.stop()).toBe(0)
    },
    120_000,
  )

  test("--relay on: the relay row checks this user's rights in the relay namespace; a user without them is told which, and doctor exits 1", async () => {
    const c = await clients()
    // An untainted node the relay pod could be scheduled to (vnode's default taint keeps it off the others).
    const host = startVnode(uniqueName('doctor-relay-host'), ['--no-default-taint', '--rm'])
    await host.ready()
    const admin = await json(['--relay', 'on', '--relay-namespace', 'vnode-system'])
    expect(admin.byId.relay).toMatchObject({verdict: 'ok', why: expect.stringMatching(/^up --relay on makes a relay pod: this user may make it in vnode-system, and \d+ nodes? may run it$/)})
    expect(admin.byId.relay.why).not.toMatch(/and 0 nodes/)
    expect(await host.stop()).toBe(0)
    expect((await json(['--relay', 'off'])).byId.relay).toMatchObject({verdict: 'off', fix: {text: 'drop --relay off'}})
    // A service account with no role: its token, in a kubeconfig of the test's own.
    const ns = uniqueName('doctor-rbac')
    await createNamespace(c.core, ns)
    try {
      await c.core.createNamespacedServiceAccount({namespace: ns, body: {metadata: {name: 'nobody'}}})
      const token = (await c.core.createNamespacedServiceAccountToken({name: 'nobody', namespace: ns, body: {spec: {audiences: [], expirationSeconds: 600}}})).status!.token
      const cluster = c.kc.getCurrentCluster()!
      const ca = cluster.caData ?? (await import('node:fs')).readFileSync(cluster.caFile!).toString('base64')
      const path = join(dir, `${ns}.kubeconfig`)
      const {writeFileSync} = await import('node:fs')
      writeFileSync(
        path,
        `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${cluster.server}", certificate-authority-data: "${ca}"}}]\nusers: [{name: u, user: {token: "${token}"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
        {mode: 0o600},
      )
      const r = await json(['--relay', 'on', '--relay-namespace', ns, '--kubeconfig', path])
      expect(r.exitCode).toBe(1)
      expect(r.byId.relay).toMatchObject({
        verdict: 'missing',
        why: expect.stringContaining(`this user may not create pods, delete pods, watch pods, create configmaps, create pods/portforward in namespace ${ns}`),
        fix: {text: expect.stringContaining(`a Role in ${ns} allowing create pods`)},
        unmet: true,
      })
    } finally {
      await deleteNamespace(c.core, ns)
    }
  })

  test('an API server that is not there is a verdict, not a crash; bad input is an error', async () => {
    const bad = await json([], {env: {...process.env, KUBECONFIG: join(dir, 'missing-kubeconfig')}})
    expect(bad.exitCode).toBe(0)
    expect(bad.byId.cluster).toMatchObject({verdict: 'missing', why: expect.stringContaining('no kubeconfig found'), fix: {command: 'kubectl vnode cluster up'}})
    expect(bad.byId.services.why).toMatch(/not known/)
    const refused = await doctor(['--request-timeout', '3s', '--kubeconfig', await refusedKubeconfig(dir)])
    expect(refused.exitCode).toBe(0)
    expect(refused.stdout).toMatch(/^cluster +missing +The connection to the server 127\.0\.0\.1:1 was refused/m)
    // One that accepts and never answers: the verdict after --request-timeout, not a hang.
    const silent = createServer(() => undefined)
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
    try {
      const port = (silent.address() as AddressInfo).port
      const started = Date.now()
      const hung = await doctor(['--request-timeout', '1s', '--kubeconfig', await refusedKubeconfig(dir, port)])
      expect(hung.exitCode).toBe(0)
      expect(hung.stdout).toMatch(new RegExp(`^cluster +missing +Unable to connect to the server 127\\.0\\.0\\.1:${port}: no answer within`, 'm'))
      expect(Date.now() - started).toBeLessThan(30_000)
    } finally {
      silent.close()
    }
    expect(await doctor(['-o', 'yaml'])).toMatchObject({exitCode: 1, stdout: '', stderr: 'error: Expected --output=yaml to be one of: text, json'})
    expect(await doctor(['--sandbox', 'maybe'])).toMatchObject({exitCode: 1, stderr: 'error: Expected --sandbox=maybe to be one of: auto, namespaces, none'})
    expect(await doctor(['--context', 'nope'])).toMatchObject({exitCode: 1, stderr: 'error: context "nope" does not exist in the kubeconfig'})
  })
})

/** A kubeconfig whose server is 127.0.0.1:port (by default 1, where nothing listens). */
async function refusedKubeconfig(dir: string, port = 1): Promise<string> {
  const {writeFileSync} = await import('node:fs')
  const path = join(dir, `refused-${port}.kubeconfig`)
  writeFileSync(
    path,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    {mode: 0o600},
  )
  return path
}
