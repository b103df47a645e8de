import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, startVnode, stopAllVnodes, testEnv, uniqueName, vnode, waitFor} from './helpers.js'

function boundPod(name: string, node: string, labels: Record<string, string> = {}, command = ['sleep', '300']): V1Pod {
  return {
    metadata: {name, labels},
    spec: {nodeName: node, tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}], containers: [{name: 'main', image: 'sleeper', command}]},
  }
}

describeE2e('kubectl vnode kill', () => {
  let c: Clients
  const node = uniqueName('clikill')
  // A Node no vnode runs (its kubelet is gone): nobody completes a graceful deletion there.
  const ghost = uniqueName('ghost')
  const ns = uniqueName('kill')

  const exists = async (name: string) => {
    try {
      return await c.core.readNamespacedPod({name, namespace: ns})
    } catch (error) {
      if ((error as {code?: number}).code === 404) return undefined
      throw error
    }
  }
  const create = (name: string, labels: Record<string, string> = {}, on = node, command?: string[]) => c.core.createNamespacedPod({namespace: ns, body: boundPod(name, on, labels, command)})

  beforeAll(async () => {
    c = await clients()
    const p = startVnode(node)
    await createNamespace(c.core, ns)
    await c.core.createNode({body: {metadata: {name: ghost}}})
    await p.ready()
  })

  afterAll(async () => {
    await deleteNamespace(c.core, ns)
    await c.core.deleteNode({name: ghost}).catch(() => undefined)
    await stopAllVnodes()
  })

  test('--no-wait asks for a graceful deletion through the API and returns: the pod is Terminating with the grace period', async () => {
    await create('nowait', {}, ghost)
    const r = await vnode(['kill', '-n', ns, 'nowait', '--no-wait', '--grace-period', '20'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/pod\/nowait deletion requested \(grace period 20s\)/)
    const pod = await exists('nowait')
    expect(pod?.metadata?.deletionTimestamp).toBeDefined()
    expect(pod?.metadata?.deletionGracePeriodSeconds).toBe(20)
  })

  test("--force: grace period 0, the object is removed, progress printed with timings, kubectl's warning on stderr", async () => {
    await create('forced')
    const r = await vnode(['kill', '-n', ns, 'forced', '--force'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/^\[\s*\d+(ms|\.\ds)\] pod\/forced deletion requested \(grace period 0s, removed at once\)$/m)
    expect(r.stdout).toMatch(/^\[\s*\d+(ms|\.\ds)\] pod\/forced removed: pod "forced" deleted$/m)
    expect(r.stderr).toContain('Warning: Immediate deletion does not wait for confirmation')
    expect(await exists('forced')).toBeUndefined()
  })

  test('a pod not found: error on stderr and exit 1, while the other pod of the same call is still deleted', async () => {
    await create('real')
    const r = await vnode(['kill', '-n', ns, 'missing', 'real', '--force'])
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toContain('error: pods "missing" not found')
    expect(r.stdout).toContain('pod/real removed')
    expect(await exists('real')).toBeUndefined()
  })

  test('--timeout: a graceful kill that nobody completes gives up with exit 1 after the timeout; the pod stays Terminating', async () => {
    await create('stuck', {}, ghost)
    const started = Date.now()
    const r = await vnode(['kill', '-n', ns, 'stuck', '--timeout', '2s'])
    const took = Date.now() - started
    expect(r.exitCode).toBe(1)
    expect(r.stdout).toMatch(/pod\/stuck deletion requested \(grace period 30s\)/)
    expect(r.stdout).toMatch(/pod\/stuck status Terminating/)
    expect(r.stderr).toMatch(/error: timed out waiting for pod\/stuck to be removed \(gave up after 2\.\ds\)/)
    expect(took).toBeGreaterThanOrEqual(2000)
    expect(took).toBeLessThan(10_000)
    expect((await exists('stuck'))?.metadata?.deletionTimestamp).toBeDefined()
  })

  test('--wait follows the pod: each container exit and the removal, as the node reports them', async () => {
    // Exits 143 on SIGTERM: the node reports that exit, then removes the object.
    await create('followed', {}, node, ['node', '-e', "process.on('SIGTERM', () => process.exit(143)); setInterval(() => {}, 1000)"])
    await waitFor(async () => (await exists('followed'))?.status?.containerStatuses?.[0]?.state?.running, 'followed running', 30_000)
    const child = execa(cliPath(), ['kill', '-n', ns, 'followed', '--timeout', '30s'], {env: testEnv(), reject: false})
    let out = ''
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    const r = await child
    expect(r.exitCode).toBe(0)
    expect(out).toMatch(/container main exited: exit code 143 \(Error\)/)
    const lines = out.trim().split('\n')
    expect(lines.at(-1)).toMatch(/pod\/followed removed: pod "followed" deleted$/)
    const order = ['deletion requested', 'status Terminating', 'container main exited', 'removed'].map((s) => lines.findIndex((l) => l.includes(s)))
    expect(order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1]))).toBe(true)
  })

  test('-l selects the pods to kill; a selector matching nothing says so and exits 0; names and -l together are refused', async () => {
    await create('batch-1', {app: 'batch'})
    await create('batch-2', {app: 'batch'})
    await create('keep', {app: 'other'})
    const r = await vnode(['kill', '-n', ns, '-l', 'app=batch', '--force'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toContain('pod/batch-1 removed')
    expect(r.stdout).toContain('pod/batch-2 removed')
    expect(await exists('batch-1')).toBeUndefined()
    expect(await exists('keep')).toBeDefined()
    const none = await vnode(['kill', '-n', ns, '-l', 'app=none'])
    expect(none.exitCode).toBe(0)
    expect(none.stderr.trim()).toBe(`No resources found in ${ns} namespace.`)
    const both = await vnode(['kill', '-n', ns, 'keep', '-l', 'app=other'])
    expect(both.exitCode).toBe(1)
    expect(both.stderr.trim()).toBe('error: pod names cannot be given together with a selector (-l)')
    const nothing = await vnode(['kill', '-n', ns])
    expect(nothing.exitCode).toBe(1)
    expect(nothing.stderr).toMatch(/^error: give pod names or a label selector/)
    const bad = await vnode(['kill', '-n', ns, 'keep', '--timeout', 'later'])
    expect(bad.exitCode).toBe(1)
    expect(bad.stderr).toMatch(/^error: invalid --timeout "later"/)
  })
})
