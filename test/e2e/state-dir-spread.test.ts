import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {onExt4, topFlag} from '../support/fs-flags.js'
import {containerStatus, createPod, nodeContainer, podOn, waitPod} from './faults-helpers.js'
import {clients, createNamespace, deleteNamespace, describeE2e, kubectl, startVnode, stopAllVnodes, type Clients, type VnodeProcess, uniqueName} from './helpers.js'

describeE2e("a node's state dir: each pod's tree in a block group of its own where the filesystem places by Orlov", () => {
  let c: Clients
  let vnode: VnodeProcess
  const ns = uniqueName('spread')
  const node = uniqueName('spread')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    vnode = startVnode(node, ['--no-default-taint'])
    await vnode.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c?.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('pods/ and logs/ carry ext4 top-of-hierarchy flag (T) on ext2/3/4 and nothing elsewhere; a pod under them runs, its own dir without it', async () => {
    const pod = await createPod(c.core, podOn(node, ns, 'p', [nodeContainer('app', 'setInterval(()=>{},1000)')]))
    await waitPod(c.core, ns, 'p', (p) => !!containerStatus(p, 'app')?.state?.running, 'running', 60_000)
    const ext = onExt4(vnode.stateDir)
    for (const tree of ['pods', 'logs']) expect([tree, topFlag(join(vnode.stateDir, tree))]).toEqual([tree, ext])
    const podDir = join(vnode.stateDir, 'pods', pod.metadata!.uid!)
    expect(existsSync(podDir)).toBe(true)
    expect(topFlag(podDir)).toBe(false)
  })
})
