import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {existsSync, mkdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {detectCgroups} from '../../src/emulator/runtime/cgroups/detect.js'
import {nodeRootName} from '../../src/emulator/runtime/cgroups/layout.js'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, processesMatching, runDir, uniqueName, waitFor} from './helpers.js'

const socket = uniqueName('vnode-hup')
const tmux = (args: string[]) => execa('tmux', ['-L', socket, ...args], {reject: false})

/** Where this host would put a node's cgroup tree (none where cgroups are not available). */
function cgroupRoots(node: string, stateDir: string): string[] {
  const host = detectCgroups('auto')
  const name = nodeRootName(node, stateDir)
  if (host.mode === 'v2') return [join(host.v2Dir!, name)]
  if (host.mode === 'v1') return [...new Set(host.v1Dirs!.values())].map((d) => join(d, name))
  return []
}

/**
 * The terminal of `kubectl vnode up` goes away (its window closed, its tmux
 * session killed): SIGHUP. The node shuts down as on SIGTERM, pods
 * terminated, and leaves no process, sandbox or cgroup behind, although
 * nothing can be written to the terminal any more.
 */
describeE2e('kubectl vnode up whose terminal is closed (SIGHUP)', () => {
  let c: Clients
  const node = uniqueName('hup')
  const ns = uniqueName('hup')
  const marker = uniqueName('hup-marker')
  const stateDir = join(runDir(), 'nodes', node)

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await tmux(['kill-server'])
    await deleteNamespace(c.core, ns)
    await c.core.deleteNode({name: node}).catch(() => undefined)
  })

  test('stops the node gracefully: its pods end, nothing is left running, no cgroup of the node stays', async () => {
    mkdirSync(stateDir, {recursive: true})
    // The default sandbox and cgroups modes, as users run it.
    const cmd = `KUBECONFIG='${kubeconfigPath()}' exec '${cliPath()}' up --name ${node} --state-dir '${stateDir}' --port 0`
    expect((await tmux(['new-session', '-d', '-s', 'hup', '-x', '120', '-y', '30', 'env', '-u', 'CI', 'sh', '-c', cmd])).exitCode).toBe(0)
    await waitFor(async () => (await c.core.readNode({name: node})).status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True', 'the node Ready', 30_000, 200)
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name: 'app'},
        spec: {nodeName: node, terminationGracePeriodSeconds: 5, containers: [{name: 'main', image: 'node', command: [process.execPath, '-e', 'setInterval(() => {}, 1000)', marker]}]},
      },
    })
    await waitFor(async () => (await c.core.readNamespacedPod({name: 'app', namespace: ns})).status?.containerStatuses?.[0]?.ready, 'the pod Ready', 30_000, 200)
    expect(await processesMatching(marker)).toHaveLength(1)
    const roots = cgroupRoots(node, stateDir)
    for (const r of roots) expect(existsSync(r)).toBe(true)

    await tmux(['kill-session', '-t', 'hup'])
    // Graceful: the node is cordoned and reported NotReady, then its pods end (PID 1 ignores SIGTERM: up to the 5 s grace).
    let left: string[] = []
    await waitFor(
      async () => {
        left = (await processesMatching(`--name ${node}`, {withRuntime: true})).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '))
        return left.length === 0
      },
      () => `up and everything it ran to exit (left: ${left.join(' | ')})`,
      30_000,
      200,
    )
    expect(await processesMatching(marker, {withRuntime: true})).toEqual([])
    const n = await c.core.readNode({name: node})
    expect(n.spec?.unschedulable).toBe(true)
    expect(n.status?.conditions?.find((x) => x.type === 'Ready')?.status).not.toBe('True')
    const pod = await c.core.readNamespacedPod({name: 'app', namespace: ns})
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toBeDefined()
    expect(roots.filter((r) => existsSync(r))).toEqual([])
  }, 90_000)
})
