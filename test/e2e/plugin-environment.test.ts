import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {readFileSync} from 'node:fs'
import {processEnv} from '../../src/emulator/runtime/pod/adoption.js'
import {containerStatus, createPod, podOn, waitPod} from './faults-helpers.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubectl, nodeContainer, processesMatching, startVnode, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/**
 * The plugin's entry (bin/kubectl-vnode, what kubectl runs) starts node in
 * its own place with glibc's malloc on one arena: the node `up` runs has
 * it, a caller's own choice wins, and no pod sees it.
 */
describeE2e("the plugin's entry: node's environment", () => {
  let c: Clients
  const ns = uniqueName('entryenv')
  const node = uniqueName('entryenv')
  const own = uniqueName('entryenv-own')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c?.core, ns)
    for (const n of [node, own]) await kubectl(['delete', 'node', n, '--ignore-not-found'])
  })

  test('`up` runs as node itself (no shell left) with MALLOC_ARENA_MAX=1; a pod on it has no such variable', async () => {
    const vnode = startVnode(node, ['--no-default-taint'])
    await vnode.ready()
    // The pid kubectl started is node's: sh exec'd it in its place.
    expect(readFileSync(`/proc/${vnode.pid}/comm`, 'utf8').trim()).toBe('node')
    expect(processEnv(vnode.pid).MALLOC_ARENA_MAX).toBe('1')

    const mark = uniqueName('entryenv-pod')
    await createPod(c.core, podOn(node, ns, 'env', [nodeContainer('app', `/*${mark}*/setInterval(()=>{},1000)`)]))
    await waitPod(c.core, ns, 'env', (p) => !!containerStatus(p, 'app')?.state?.running, 'running', 60_000)
    const [pid] = await waitFor(async () => {
      const pids = await processesMatching(mark)
      return pids.length === 1 ? pids : undefined
    }, "the pod's process")
    const env = processEnv(pid!)
    expect(env.HOSTNAME).toBe('env')
    expect(env).not.toHaveProperty('MALLOC_ARENA_MAX')
  })

  test("a caller's own MALLOC_ARENA_MAX is kept", async () => {
    const vnode = startVnode(own, ['--no-default-taint'], {MALLOC_ARENA_MAX: '4'})
    await vnode.ready()
    expect(processEnv(vnode.pid).MALLOC_ARENA_MAX).toBe('4')
  })
})
