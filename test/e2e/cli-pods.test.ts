import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, startVnode, stopAllVnodes, testEnv, uniqueName, vnode, waitFor} from './helpers.js'

/** A pod bound straight to a node (no scheduler): Pending until its node runs it. */
function boundPod(name: string, node: string, labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: {name, labels},
    spec: {nodeName: node, tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}], containers: [{name: 'main', image: 'sleeper', command: ['sleep', '300']}]},
  }
}

describeE2e('kubectl vnode pods', () => {
  let c: Clients
  const node = uniqueName('clipods')
  const plainNode = uniqueName('plain')
  const ns1 = uniqueName('pods-a')
  const ns2 = uniqueName('pods-b')
  const empty = uniqueName('pods-empty')

  beforeAll(async () => {
    c = await clients()
    const p = startVnode(node)
    for (const ns of [ns1, ns2, empty]) await createNamespace(c.core, ns)
    // A Node that vnode does not run: its pods must not be listed.
    await c.core.createNode({body: {metadata: {name: plainNode}}})
    await p.ready()
    await c.core.createNamespacedPod({namespace: ns1, body: boundPod('web', node, {app: 'web'})})
    await c.core.createNamespacedPod({namespace: ns1, body: boundPod('db', node, {app: 'db'})})
    await c.core.createNamespacedPod({namespace: ns2, body: boundPod('api', node, {app: 'web'})})
    await c.core.createNamespacedPod({namespace: ns1, body: boundPod('elsewhere', plainNode, {app: 'web'})})
    // The vnode node runs its pods; wait until it has.
    for (const [ns, name] of [
      [ns1, 'web'],
      [ns1, 'db'],
      [ns2, 'api'],
    ]) {
      await waitFor(async () => (await c.core.readNamespacedPod({name, namespace: ns})).status?.containerStatuses?.[0]?.ready, `${name} running`, 30_000)
    }
  })

  afterAll(async () => {
    for (const ns of [ns1, ns2, empty]) await deleteNamespace(c.core, ns)
    await c.core.deleteNode({name: plainNode}).catch(() => undefined)
    await stopAllVnodes()
  })

  test('lists the pods of vnode nodes in the namespace, in kubectl get columns plus NODE; other nodes are left out', async () => {
    const r = await vnode(['pods', '-n', ns1])
    expect(r.exitCode).toBe(0)
    const lines = r.stdout.split('\n')
    expect(lines[0]).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+NODE$/)
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(['db', 'web'])
    expect(lines[2]).toMatch(new RegExp(`^web\\s+1/1\\s+Running\\s+0\\s+\\d+s\\s+${node}$`))
    expect(r.stdout).not.toContain('elsewhere')
  })

  test('works as a kubectl plugin: kubectl vnode pods', async () => {
    const r = await kubectl(['vnode', 'pods', '-n', ns1])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/^web\s+1\/1\s+Running/m)
  })

  test('-A adds NAMESPACE and lists every namespace; -o wide adds IP, the PIDS of the running processes, the SANDBOX mode, the WALLS, the NETWORK and the kubelet ENDPOINT of the node', async () => {
    const r = await vnode(['pods', '-A', '-o', 'wide'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout.split('\n')[0]).toMatch(/^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+NODE\s+IP\s+PIDS\s+SANDBOX\s+WALLS\s+NETWORK\s+ENDPOINT$/)
    const nodeObj = await c.core.readNode({name: node})
    const nodeIP = nodeObj.status!.addresses!.find((a) => a.type === 'InternalIP')!.address
    const mode = nodeObj.metadata!.labels!['vnode.dev/sandbox']
    expect(['namespaces', 'none']).toContain(mode)
    const walls = nodeObj.metadata!.annotations!['vnode.dev/walls']
    expect(walls).toMatch(/^[a-z0-9,-]+$/)
    const network = nodeObj.metadata!.annotations!['vnode.dev/pod-network'].replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    expect(r.stdout).toMatch(new RegExp(`^${ns1}\\s+web\\s+1/1\\s+Running\\s+0\\s+\\d+s\\s+${node}\\s+${nodeIP.replaceAll('.', '\\.')}\\s+\\d+\\s+${mode}\\s+${walls}\\s+${network}\\s+direct$`, 'm'))
    expect(r.stdout).toMatch(new RegExp(`^${ns2}\\s+api\\s`, 'm'))
    expect(r.stdout).not.toContain('elsewhere')
  })

  test('--node picks one node (any node); a missing node is an API error as kubectl prints it', async () => {
    const r = await vnode(['pods', '-n', ns1, '--node', plainNode])
    expect(r.exitCode).toBe(0)
    expect(
      r.stdout
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['elsewhere'])
    const missing = await vnode(['pods', '--node', 'no-such-node'])
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr.trim()).toBe('Error from server (NotFound): nodes "no-such-node" not found')
  })

  test('-l filters by label; -o name prints pod/NAME', async () => {
    const r = await vnode(['pods', '-n', ns1, '-l', 'app=web', '-o', 'name'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout.trim()).toBe('pod/web')
  })

  test('-o json is a v1 List of Pods as the API serves them (no managedFields); -o yaml the same in YAML', async () => {
    const r = await vnode(['pods', '-n', ns1, '-o', 'json'])
    expect(r.exitCode).toBe(0)
    const list = JSON.parse(r.stdout)
    expect(list.kind).toBe('List')
    expect(list.items.map((p: V1Pod) => p.metadata?.name)).toEqual(['db', 'web'])
    expect(list.items[0].kind).toBe('Pod')
    expect(list.items[0].apiVersion).toBe('v1')
    expect(list.items[0].spec.nodeName).toBe(node)
    expect(list.items[0].metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT/)
    expect(list.items[0].metadata.managedFields).toBeUndefined()
    const y = await vnode(['pods', '-n', ns1, '-o', 'yaml'])
    expect(y.exitCode).toBe(0)
    expect(y.stdout).toMatch(/^apiVersion: v1\nkind: List\n/)
    expect(y.stdout).toMatch(/^ {6}name: web$/m)
    expect(y.stdout).not.toContain('managedFields')
  })

  test('no pods: kubectl\'s "No resources found in <ns> namespace." on stderr, exit 0', async () => {
    const r = await vnode(['pods', '-n', empty])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toBe('')
    expect(r.stderr.trim()).toBe(`No resources found in ${empty} namespace.`)
    const sel = await vnode(['pods', '-n', ns1, '-l', 'app=nothing'])
    expect(sel.exitCode).toBe(0)
    expect(sel.stderr.trim()).toBe(`No resources found in ${ns1} namespace.`)
  })

  test('bad input: an unknown -o format, a bad --request-timeout, a missing context', async () => {
    const o = await vnode(['pods', '-o', 'table2'])
    expect(o.exitCode).toBe(1)
    expect(o.stderr.trim()).toBe('error: unable to match a printer suitable for the output format "table2", allowed formats are: wide,json,yaml,name')
    const t = await vnode(['pods', '--request-timeout', 'soon'])
    expect(t.exitCode).toBe(1)
    expect(t.stderr).toMatch(/^error: invalid --request-timeout "soon"/)
    const ctx = await vnode(['pods', '--context', 'nope'])
    expect(ctx.exitCode).toBe(1)
    expect(ctx.stderr.trim()).toBe('error: context "nope" does not exist in the kubeconfig')
  })

  test('an unreachable API server is named plainly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-kc-'))
    try {
      // Same credentials, a port nothing listens on.
      const kc = readFileSync(kubeconfigPath(), 'utf8').replace(/server: https:\/\/127\.0\.0\.1:\d+/, 'server: https://127.0.0.1:1')
      const path = join(dir, 'kubeconfig')
      writeFileSync(path, kc, {mode: 0o600})
      const r = await vnode(['pods', '--kubeconfig', path])
      expect(r.exitCode).toBe(1)
      expect(r.stderr.trim()).toBe('The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('-w when piped: the table once, then one appended row per change, like kubectl get -w; ends cleanly on SIGINT', async () => {
    const child = execa(cliPath(), ['pods', '-n', ns1, '-w'], {env: testEnv(), reject: false, buffer: true, all: true})
    let out = ''
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    try {
      await waitFor(() => /^web\s/m.test(out), 'the initial table', 15_000, 50)
      expect(out.split('\n')[0]).toMatch(/^NAME\s+READY\s+STATUS/)
      await c.core.createNamespacedPod({namespace: ns1, body: boundPod('late', node)})
      await waitFor(() => /^late\s+0\/1\s+Pending/m.test(out), 'a row for the new pod', 15_000, 50)
      await waitFor(() => /^late\s+1\/1\s+Running/m.test(out), 'a row for the pod running', 30_000, 50)
      await c.core.deleteNamespacedPod({namespace: ns1, name: 'late'})
      await waitFor(() => /^late\s+\d\/1\s+Terminating/m.test(out), 'a row for the deletion', 15_000, 50)
      expect(out.match(/^NAME\s/gm)).toHaveLength(1) // no header again
      expect(out).not.toContain('elsewhere')
    } finally {
      child.kill('SIGINT')
    }
    const r = await child
    expect(r.exitCode).toBe(0)
    await c.core.deleteNamespacedPod({namespace: ns1, name: 'late', gracePeriodSeconds: 0}).catch(() => undefined)
  })
})
