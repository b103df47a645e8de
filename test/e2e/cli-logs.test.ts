import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {freePort} from '../../src/common/ports.js'
import {primaryAddress} from '../../src/emulator/node/host.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, startVnode, stopAllVnodes, uniqueName, vnode} from './helpers.js'

describeE2e('kubectl vnode logs', () => {
  let c: Clients
  const node = uniqueName('clilogs')
  // A Node whose kubelet API is gone: an address of this host, a port nothing listens on.
  const ghost = uniqueName('ghost')
  const ns = uniqueName('logs')

  beforeAll(async () => {
    c = await clients()
    const p = startVnode(node)
    await createNamespace(c.core, ns)
    await p.ready()
    await c.core.createNode({body: {metadata: {name: ghost}}})
    await c.core.patchNodeStatus(
      {name: ghost, body: {status: {addresses: [{type: 'InternalIP', address: primaryAddress()}], daemonEndpoints: {kubeletEndpoint: {Port: await freePort('0.0.0.0')}}}}},
      c.lib.setHeaderOptions('Content-Type', c.lib.PatchStrategy.MergePatch),
    )
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name: 'two'},
        spec: {
          nodeName: ghost,
          tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}],
          containers: [
            {name: 'app', image: 'sleeper', command: ['sleep', '300']},
            {name: 'side', image: 'sleeper', command: ['sleep', '300']},
          ],
        },
      },
    })
  })

  afterAll(async () => {
    await deleteNamespace(c.core, ns)
    await c.core.deleteNode({name: ghost}).catch(() => undefined)
    await stopAllVnodes()
  })

  test("a node without a kubelet API: the API server's error as kubectl prints it, and which node did not answer", async () => {
    const r = await vnode(['logs', '-n', ns, 'two', '--request-timeout', '20s'], {timeout: 40_000})
    expect(r.exitCode).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).toMatch(/^Error from server( \(\w+\))?: .*containerLogs\//)
    expect(r.stderr).toContain(`hint: the API server could not reach the kubelet API of node ${ghost}; is \`kubectl vnode up\` running for it?`)
  })

  test('a missing pod, a container the pod does not have, a bad --since', async () => {
    const missing = await vnode(['logs', '-n', ns, 'nope'])
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr.trim()).toBe('Error from server (NotFound): pods "nope" not found')
    const container = await vnode(['logs', '-n', ns, 'two', '-c', 'db'])
    expect(container.exitCode).toBe(1)
    expect(container.stderr.trim()).toBe('error: container db is not valid for pod two: choose one of [app side]')
    const since = await vnode(['logs', '-n', ns, 'two', '--since', 'yesterday'])
    expect(since.exitCode).toBe(1)
    expect(since.stderr).toMatch(/^error: invalid --since "yesterday"/)
  })
})
