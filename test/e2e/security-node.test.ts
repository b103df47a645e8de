import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {lstatSync, readdirSync, readFileSync, type Stats} from 'node:fs'
import {join} from 'node:path'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubectl, runDir, startVnode, stopAllVnodes, testEnv, uniqueName, type VnodeProcess, waitFor} from './helpers.js'
import {createPod, nodeContainer, podOn, waitPod, containerStatus} from './faults-helpers.js'
import {direct} from './server-helpers.js'
import {execa} from 'execa'
import {request} from 'node:https'
import {cliPath} from './env.mjs'
import {processEnv} from '../../src/emulator/runtime/pod/adoption.js'
import {readPodRecord} from '../../src/emulator/runtime/pod/record.js'

/** The status of a request with another method to the kubelet port. */
function status(port: number, method: string, path: string, tls: {cert: Buffer; key: Buffer}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({host: '127.0.0.1', port, path, method, ...tls, rejectUnauthorized: false, agent: false, timeout: 10_000}, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
}

const SecretValue = `s3cr3t-${Math.random().toString(36).slice(2)}`
const Canary = 'VNODE_SECURITY_CANARY'

interface Entry {
  path: string
  stat: Stats
  /** Every directory from the state dir down to this entry's parent. */
  parents: Stats[]
}

/** Everything under root, without following symlinks. */
function walk(root: string): Entry[] {
  const out: Entry[] = []
  const visit = (dir: string, parents: Stats[]) => {
    const here = [...parents, lstatSync(dir)]
    for (const name of readdirSync(dir)) {
      const path = join(dir, name)
      const stat = lstatSync(path)
      out.push({path, stat, parents: here})
      if (stat.isDirectory()) visit(path, here)
    }
  }
  visit(root, [])
  return out
}

/** Another user (group: 0o070 bits, others: 0o007 bits) can open it: every parent searchable and the entry readable. */
function reachable(e: Entry, shift: 3 | 0): boolean {
  const x = 0o1 << shift
  const r = 0o4 << shift
  return e.parents.every((p) => (p.mode & x) !== 0) && (e.stat.mode & r) !== 0
}

describeE2e('security: what the node exposes and to whom (docs/SECURITY.md)', () => {
  let c: Clients
  let p: VnodeProcess
  const ns = uniqueName('sec')
  const node = uniqueName('sec')
  let port = 0
  let pid = 0

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    await c.core.createNamespacedSecret({namespace: ns, body: {metadata: {name: 'creds'}, stringData: {token: SecretValue}}})
    await c.core.createNamespacedServiceAccount({namespace: ns, body: {metadata: {name: 'nobody'}}})
    // In vnode's own environment: it must not reach any container.
    process.env[Canary] = 'vnode-environment-leak'
    try {
      p = startVnode(node, ['--no-default-taint'])
    } finally {
      delete process.env[Canary]
    }
    await p.ready()
    const n = await c.core.readNode({name: node})
    port = n.status!.daemonEndpoints!.kubeletEndpoint!.Port
    await createPod(
      c.core,
      podOn(
        node,
        ns,
        'holder',
        [
          nodeContainer('app', 'setInterval(()=>{},1000)', {
            env: [
              {name: 'FROM_SECRET', valueFrom: {secretKeyRef: {name: 'creds', key: 'token'}}},
              {name: 'PLAIN', value: 'x'},
            ],
            volumeMounts: [{name: 'creds', mountPath: '/var/run/creds'}],
          }),
        ],
        {volumes: [{name: 'creds', secret: {secretName: 'creds'}}]},
      ),
    )
    await waitPod(c.core, ns, 'holder', (x) => !!containerStatus(x, 'app')?.state?.running, 'running')
    const record = readPodRecord(join(p.stateDir, 'pods', (await c.core.readNamespacedPod({name: 'holder', namespace: ns})).metadata!.uid!))!
    pid = record.containers[0]!.pid!
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('state dir: nothing vnode writes is reachable by another user (group or others), even in a world-readable state dir; keys, records, logs, pipes and secrets are 0600', () => {
    const entries = walk(p.stateDir)
    // The test made the state dir with the default umask (0755): what protects the content is what vnode makes inside.
    expect(lstatSync(p.stateDir).mode & 0o005).toBe(0o005)
    expect(entries.filter((e) => reachable(e, 3) || reachable(e, 0)).map((e) => e.path)).toEqual([])
    const mode = (e: Entry) => e.stat.mode & 0o777
    const files = (re: RegExp) => entries.filter((e) => re.test(e.path))
    for (const e of files(/\/record\.json$|\.log$|\.key$|\/io\/[^/]+\.(stdout|stderr)$/)) expect([e.path, mode(e)]).toEqual([e.path, 0o600])
    expect(files(/\/io\/[^/]+\.stdout$/).some((e) => e.stat.isFIFO())).toBe(true)
    // The secret's value is on disk only in 0600 files (its volume), never in a record or log.
    const holding = entries.filter((e) => e.stat.isFile() && readFileSync(e.path, 'utf8').includes(SecretValue))
    expect(holding.length).toBeGreaterThan(0)
    for (const e of holding) {
      expect([e.path, mode(e)]).toEqual([e.path, 0o600])
      expect(e.path).toMatch(/\/volumes\/creds\//)
    }
  })

  test('container environment: built from scratch, nothing of vnode’s (no KUBECONFIG, no canary); secrets only where the spec asks', () => {
    const env = processEnv(pid)
    expect(env[Canary]).toBeUndefined()
    expect(env.KUBECONFIG).toBeUndefined()
    expect(env.FROM_SECRET).toBe(SecretValue)
    const allowed = /^(PATH|HOME|HOSTNAME|VNODE_VOLUME_ROOT|FROM_SECRET|PLAIN|KUBERNETES_[A-Z0-9_]+)$/
    expect(Object.keys(env).filter((k) => !allowed.test(k))).toEqual([])
    // The process runs as vnode's own user: no isolation between pods or from that user (documented).
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]
    expect(Number(uid)).toBe(process.getuid!())
  })

  test('kubelet API: 401 without credentials, 403 for an identity without nodes/* rights, 200 for an authorized one; exec, attach and port-forward only as authorized upgrades; no run', async () => {
    expect((await direct(port, '/pods')).status).toBe(401)
    expect((await direct(port, '/healthz')).status).toBe(401)
    const token = (await c.core.createNamespacedServiceAccountToken({name: 'nobody', namespace: ns, body: {spec: {audiences: [], expirationSeconds: 600}}})).status!.token
    for (const path of [
      '/pods',
      '/stats/summary',
      `/containerLogs/${ns}/holder/app`,
      '/metrics/resource',
      `/exec/${ns}/holder/app?command=id`,
      `/attach/${ns}/holder/app`,
      `/portForward/${ns}/holder`,
    ]) {
      expect([path, (await direct(port, path, {token})).status]).toEqual([path, 403])
    }
    const user = c.kc.getCurrentUser()!
    const admin = {cert: Buffer.from(user.certData!, 'base64'), key: Buffer.from(user.keyData!, 'base64')}
    const pods = await direct(port, '/pods', admin)
    expect(pods.status).toBe(200)
    expect(pods.body).toContain('holder')
    // Pod specs are served (as the kubelet does), but a secret's value never is: env refers to it.
    expect(pods.body).not.toContain(SecretValue)
    // Streaming needs an upgrade: a plain request, even an authorized one, runs nothing.
    for (const path of [`/exec/${ns}/holder/app?command=id`, `/attach/${ns}/holder/app`, `/portForward/${ns}/holder`]) {
      expect([path, (await direct(port, path, admin)).status]).toEqual([path, 400])
    }
    expect((await direct(port, `/run/${ns}/holder/app`, admin)).status).toBe(404)
    // Nothing can be written through it.
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) expect([method, await status(port, method, '/pods', admin)]).toEqual([method, 405])
  })

  test('a state dir vnode creates itself is 0700, parents included', async () => {
    const base = join(runDir(), uniqueName('fresh'))
    const fresh = join(base, 'nested', 'state')
    const name = uniqueName('secfresh')
    const child = execa(cliPath(), ['up', '--name', name, '--no-tui', '-o', 'json', '--port', '0', '--state-dir', fresh], {env: testEnv(), reject: false, buffer: false})
    try {
      let out = ''
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
      await waitFor(() => out.includes('"step":"ready"'), 'the second node ready', 30_000)
      expect(lstatSync(fresh).mode & 0o777).toBe(0o700)
      expect(lstatSync(join(base, 'nested')).mode & 0o777).toBe(0o700)
    } finally {
      child.kill('SIGTERM')
      await child
      await kubectl(['delete', 'node', name, '--ignore-not-found'])
    }
  })
})
