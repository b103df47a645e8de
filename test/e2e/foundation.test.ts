import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubectl, processesMatching, startVnode, stopAllVnodes, uniqueName, vnode, waitFor} from './helpers.js'

describeE2e('foundation: a node on a real control plane', () => {
  let c: Clients
  beforeAll(async () => {
    c = await clients()
  })
  afterAll(stopAllVnodes)

  test('vnode up registers a Node that is Ready within 15 s and renews its Lease; kubectl sees it', async () => {
    const name = uniqueName('found')
    const started = Date.now()
    const p = startVnode(name)
    await p.ready(15_000)
    const node = await waitFor(
      async () => {
        const n = await c.core.readNode({name})
        return n.status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True' ? n : undefined
      },
      'node Ready',
      15_000,
    )
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(node.metadata?.labels?.['type']).toBe('virtual-kubelet')

    const get = await kubectl(['get', 'nodes', '-o', 'wide'])
    expect(get.exitCode).toBe(0)
    expect(get.stdout).toMatch(new RegExp(`^${name}\\s+Ready\\s`, 'm'))

    const lease1 = await c.coordination.readNamespacedLease({name, namespace: 'kube-node-lease'})
    expect(lease1.spec?.holderIdentity).toBe(name)
    expect(lease1.metadata?.ownerReferences?.[0]?.uid).toBe(node.metadata?.uid)
    const t1 = new Date(lease1.spec!.renewTime!).getTime()
    const lease2 = await waitFor(
      async () => {
        const l = await c.coordination.readNamespacedLease({name, namespace: 'kube-node-lease'})
        return new Date(l.spec!.renewTime!).getTime() > t1 ? l : undefined
      },
      'lease renewal',
      15_000,
      500,
    )
    const gap = new Date(lease2.spec!.renewTime!).getTime() - t1
    expect(gap).toBeGreaterThanOrEqual(8_000)
    expect(gap).toBeLessThanOrEqual(13_000)

    expect(await p.stop('SIGTERM')).toBe(0)
  })

  test('the scheduler and controller-manager run: a Deployment tolerating the vnode taint gets its pod bound to the node', async () => {
    const name = uniqueName('sched')
    const p = startVnode(name)
    await p.ready()
    const ns = uniqueName('ns')
    await createNamespace(c.core, ns)
    try {
      await c.apps.createNamespacedDeployment({
        namespace: ns,
        body: {
          metadata: {name: 'web'},
          spec: {
            replicas: 1,
            selector: {matchLabels: {app: 'web'}},
            template: {
              metadata: {labels: {app: 'web'}},
              spec: {
                nodeSelector: {'kubernetes.io/hostname': name},
                tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}],
                containers: [{name: 'web', image: 'sleeper', command: ['sleep', '300']}],
              },
            },
          },
        },
      })
      const pod = await waitFor(
        async () => {
          const pods = await c.core.listNamespacedPod({namespace: ns})
          return pods.items.find((x) => x.spec?.nodeName === name)
        },
        'the deployment pod to be scheduled onto the vnode node',
        60_000,
        500,
      )
      expect(pod.metadata?.ownerReferences?.[0]?.kind).toBe('ReplicaSet')
    } finally {
      await deleteNamespace(c.core, ns)
      await p.stop()
    }
  })
})

describeE2e('cluster up / status / down', () => {
  test('a second control plane starts, reports, and stops leaving no process behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-cluster-'))
    try {
      const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0'], {timeout: 120_000})
      expect(up.stderr + up.stdout).toContain(`export KUBECONFIG=${join(dir, 'kubeconfig')}`)
      expect(up.exitCode).toBe(0)
      const status = await vnode(['cluster', 'status', '--dir', dir])
      expect(status.exitCode).toBe(0)
      expect(status.stdout).toMatch(/kube-apiserver\s+running \(pid \d+\)/)
      const pids = [...status.stdout.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]))
      expect(pids).toHaveLength(4)
      const down = await vnode(['cluster', 'down', '--dir', dir])
      expect(down.exitCode).toBe(0)
      const left = (await processesMatching(dir)).filter((pid) => pids.includes(pid))
      expect(left).toEqual([])
      const after = await vnode(['cluster', 'status', '--dir', dir])
      expect(after.exitCode).toBe(1)
      expect(after.stdout).toContain('not running')
      // down keeps the directory (data, certificates, kubeconfig) for the next up; --purge removes it, and only it.
      expect(existsSync(join(dir, 'kubeconfig'))).toBe(true)
      const purge = await vnode(['cluster', 'down', '--dir', dir, '--purge'])
      expect(purge).toMatchObject({exitCode: 0, stdout: 'control plane not running'})
      expect(existsSync(dir)).toBe(false)
      expect(existsSync(join(process.env[E2eEnv.binDir]!, 'kube-apiserver'))).toBe(true)
    } finally {
      await vnode(['cluster', 'down', '--dir', dir])
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('cluster up without binaries names the build command and exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-nobin-'))
    try {
      const {execa} = await import('execa')
      const {cliPath} = await import('./env.mjs')
      const r = await execa(cliPath(), ['cluster', 'up', '--dir', dir], {
        reject: false,
        env: {PATH: '/usr/bin:/bin', HOME: dir, VNODE_CACHE_DIR: join(dir, 'cache')},
        extendEnv: false,
      })
      expect(r.exitCode).toBe(1)
      expect(r.stderr).toMatch(/^error: control plane binaries not found: etcd, kube-apiserver.*npm run controlplane:build/)
      expect(r.stderr).not.toMatch(/\n\s+at /)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
