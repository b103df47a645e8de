import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa, execaSync} from 'execa'
import {chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, uniqueName, VnodeProcess, waitFor} from './helpers.js'

/** nobody:nogroup on Debian. */
const Nobody = 65534
const isRoot = process.getuid?.() === 0
/** As root the node runs as nobody, the way a user without privileges runs it; otherwise as this user. */
const asUser = isRoot ? ['setpriv', `--reuid=${Nobody}`, `--regid=${Nobody}`, '--clear-groups', '--'] : []

/** Whether that user can run this checkout's CLI (a checkout under a 0700 home cannot be). */
function userCanRun(): boolean {
  if (!isRoot) return true
  const [file, ...args] = [...asUser, process.execPath, '-e', `require('fs').accessSync(${JSON.stringify(cliPath())}, 5)`]
  return execaSync(file, args, {reject: false}).exitCode === 0
}

/**
 * The pod sandbox without privileges: bubblewrap makes a user namespace
 * where the host allows one, so `--sandbox auto` gives an unprivileged user
 * the same mount, PID and UTS namespaces as root gets (no cgroups, no pod
 * network: those need root).
 */
describeE2e('the pod sandbox for a user without privileges (user namespaces)', () => {
  let c: Clients
  let home: string
  let node: VnodeProcess | undefined
  const name = uniqueName('unpriv')
  const ns = uniqueName('unpriv')
  const runnable = userCanRun()

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    home = mkdtempSync(join(tmpdir(), 'vnode-unpriv-'))
    copyFileSync(kubeconfigPath(), join(home, 'kubeconfig'))
    chmodSync(home, 0o700)
    chmodSync(join(home, 'kubeconfig'), 0o600)
    if (isRoot) for (const p of [home, join(home, 'kubeconfig')]) chownSync(p, Nobody, Nobody)
  })
  afterAll(async () => {
    await node?.stop('SIGTERM', 40_000).catch(() => node?.stop('SIGKILL'))
    await deleteNamespace(c.core, ns)
    await c.core.deleteNode({name}).catch(() => undefined)
    rmSync(home, {recursive: true, force: true})
  })

  test('auto picks the sandbox: PID 1, the pod hostname, a ConfigMap at its real path; the node stops cleanly', async () => {
    if (!runnable) {
      process.stderr.write(`sandbox-unprivileged: ${cliPath()} is not readable by uid ${Nobody}; not run\n`)
      return
    }
    const stateDir = join(home, 'state')
    mkdirSync(stateDir, {mode: 0o700})
    if (isRoot) chownSync(stateDir, Nobody, Nobody)
    const [file, ...args] = [...asUser, process.execPath, cliPath(), 'up', '--name', name, '--no-tui', '-o', 'json', '--state-dir', stateDir, '--port', '0']
    const child = execa(file, args, {env: {PATH: process.env.PATH, HOME: home, KUBECONFIG: join(home, 'kubeconfig')}, extendEnv: false, reject: false, buffer: false, forceKillAfterDelay: false})
    node = new VnodeProcess(name, stateDir, child)
    await node.ready()
    const labels = (await c.core.readNode({name})).metadata?.labels ?? {}
    expect(labels['vnode.dev/sandbox']).toBe('namespaces')
    expect(labels['vnode.dev/cgroups']).toBe('none')
    await c.core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'app'}, data: {'app.conf': 'level=debug'}}})
    const script =
      "const fs = require('fs'); console.log(JSON.stringify({pid: process.pid, host: require('os').hostname(), conf: fs.readFileSync('/etc/app/app.conf', 'utf8'), uid: process.getuid()})); process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000)"
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
    expect(JSON.parse(out)).toEqual({pid: 1, host: 'web', conf: 'level=debug', uid: isRoot ? Nobody : process.getuid!()})
    expect(await node.stop()).toBe(0)
    node = undefined
  }, 90_000)
})
