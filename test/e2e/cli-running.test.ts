import {beforeAll, expect, test} from '@jest/globals'
import {type Clients, describeE2e, nodeWithNamespace, processesMatching, uniqueName, vnode, waitFor} from './helpers.js'

/** The plugin's commands against a node that really runs its pods. */
describeE2e('kubectl vnode pods / kill / logs with running pods', () => {
  const f = nodeWithNamespace('clirun')
  const {ns, node: nodeName} = f
  const marker = uniqueName('marker')
  let c: Clients
  beforeAll(() => {
    c = f.c
  })

  const create = (name: string, command: string[], grace = 30) =>
    c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name},
        spec: {
          nodeName,
          terminationGracePeriodSeconds: grace,
          containers: [{name: 'main', image: 'node', command}],
        },
      },
    })

  const running = (name: string) =>
    waitFor(
      async () => {
        const p = await c.core.readNamespacedPod({name, namespace: ns})
        return p.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.ready ? p : undefined
      },
      `${name} Running`,
      30_000,
    )

  test('pods -o wide shows the running process id; logs shows its output', async () => {
    await create('talker', ['node', '-e', `console.log('hello ${marker}'); setInterval(() => {}, 1000)`])
    await running('talker')
    const pids = await processesMatching(`hello ${marker}`)
    expect(pids).toHaveLength(1)
    const wide = await vnode(['pods', '-n', ns, '-o', 'wide'])
    expect(wide.exitCode).toBe(0)
    // A plain node: its pods on the host's network, and the API server reaching its kubelet API directly.
    expect(wide.stdout).toMatch(
      new RegExp(
        `^talker\\s+1/1\\s+Running\\s+0\\s+\\S+\\s+${nodeName}\\s+\\S+\\s+${pids[0]}\\s+none\\s+user-${process.getuid!()}-only\\s+host: pods run without namespaces \\(--sandbox none, or the host does not allow them\\)\\s+direct\\s*$`,
        'm',
      ),
    )
    const logs = await waitFor(
      async () => {
        const r = await vnode(['logs', 'talker', '-n', ns])
        return r.stdout.includes(`hello ${marker}`) ? r : undefined
      },
      'logs',
      15_000,
    )
    expect(logs.exitCode).toBe(0)
  })

  test('kill --wait reports the container exit and the removal, done by the node', async () => {
    // Exits 0 on SIGTERM after a short cleanup.
    await create('graceful', ['node', '-e', `process.on('SIGTERM', () => setTimeout(() => process.exit(0), 300)); setInterval(() => {}, 1000)`])
    await running('graceful')
    const started = Date.now()
    const r = await vnode(['kill', 'graceful', '-n', ns, '--timeout', '30s'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/container main exited: exit code 0 \(Completed\)/)
    expect(r.stdout).toMatch(/removed: pod "graceful" deleted/)
    // The node finished it promptly, not after the 30 s grace.
    expect(Date.now() - started).toBeLessThan(10_000)
    await expect(c.core.readNamespacedPod({name: 'graceful', namespace: ns})).rejects.toMatchObject({code: 404})
  })
})
