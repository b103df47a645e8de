import {expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {describeE2e, kubectl, nodeWithNamespace, waitFor} from './helpers.js'
import {createPod, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'

/**
 * The kubelet's periodic status reconcile: a status someone else wrote over
 * the node's is written again within about 10 s, and a status nobody
 * touched is never written again.
 */
describeE2e('pod status reconcile: the node rewrites a status someone else overwrote', () => {
  const f = nodeWithNamespace('reconcile')
  const {ns, node} = f
  const ready = (p: V1Pod | undefined) => p?.status?.conditions?.find((c) => c.type === 'Ready')

  test('a Ready condition patched to False by hand is True again within 15 s; an untouched status is not rewritten', async () => {
    await createPod(f.c.core, podOn(node, ns, 'steady', [nodeContainer('app', 'setInterval(() => {}, 1000)')]))
    const running = await waitPod(f.c.core, ns, 'steady', (p) => ready(p)?.status === 'True', 'steady Ready', 30_000)
    // Untouched for longer than two reconcile checks: nothing writes the pod (its resourceVersion stays).
    await new Promise((r) => setTimeout(r, 12_000))
    const idle = await readPod(f.c.core, ns, 'steady')
    expect(idle!.metadata!.resourceVersion).toBe(running.metadata!.resourceVersion)

    const patch = JSON.stringify({status: {conditions: [{type: 'Ready', status: 'False', reason: 'Tampered', message: 'written by hand'}]}})
    const r = await kubectl(['patch', 'pod', 'steady', '-n', ns, '--subresource=status', '--type=strategic', '-p', patch])
    expect(r).toMatchObject({exitCode: 0})
    const tampered = await readPod(f.c.core, ns, 'steady')
    const patchedAt = Date.now()
    expect(ready(tampered)).toMatchObject({status: 'False', reason: 'Tampered'})
    const back = await waitPod(f.c.core, ns, 'steady', (p) => ready(p)?.status === 'True', 'Ready True again', 20_000)
    expect(Date.now() - patchedAt).toBeLessThan(15_000)
    expect(ready(back)!.reason).toBeUndefined()
    expect(ready(back)!.message).toBeUndefined()
    expect(back.status!.containerStatuses![0]).toMatchObject({ready: true, restartCount: 0})
    expect(back.status!.containerStatuses![0].state!.running).toBeDefined()
    const get = await waitFor(async () => {
      const g = await kubectl(['get', 'pod', 'steady', '-n', ns, '--no-headers'])
      return /\s1\/1\s+Running\s/.test(g.stdout) ? g.stdout : undefined
    }, 'kubectl get showing 1/1 Running')
    expect(get).toMatch(/^steady\s+1\/1\s+Running\s+0\s/)
  }, 90_000)
})
