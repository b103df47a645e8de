import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {Emulator} from '../../src/emulator/emulator.js'
import {TestProvider} from '../support/test-provider.js'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, kubectl, runDir, uniqueName, waitFor} from './helpers.js'

/** The inotify watches this process holds (Linux): fs.watch handles that are still open. */
function inotifyWatches(): number {
  let n = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) !== 'anon_inode:inotify') continue
      n += readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('inotify wd:')).length
    } catch {
      /* closed meanwhile */
    }
  }
  return n
}

const Mirror = 'kubernetes.io/config.mirror'
const Hash = 'kubernetes.io/config.hash'

describeE2e('static pods from a manifest directory, with mirror pods (test provider)', () => {
  let c: Clients
  let emulator: Emulator
  let provider: TestProvider
  const nodeName = uniqueName('staticnode')
  const ns = uniqueName('static')
  const dir = join(runDir(), 'manifests', nodeName)
  const errors: string[] = []
  // Static pods are named <name>-<node>.
  const web = `web-${nodeName}`
  const db = `db-${nodeName}`

  const manifest = (name: string, namespace: string | undefined, env: Record<string, string> = {}) =>
    `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
${namespace ? `  namespace: ${namespace}\n` : ''}  labels: {app: ${name}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: busybox
    env: [${Object.entries(env)
      .map(([k, v]) => `{name: ${k}, value: "${v}"}`)
      .join(', ')}]
`

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    mkdirSync(dir, {recursive: true})
    // web goes to the default namespace (none given); db to the test namespace.
    writeFileSync(join(dir, 'web.yaml'), manifest('web', undefined))
    writeFileSync(join(dir, 'db.json'), JSON.stringify({apiVersion: 'v1', kind: 'Pod', metadata: {name: 'db', namespace: ns}, spec: {containers: [{name: 'app', image: 'busybox'}]}}))
    const stateDir = join(runDir(), 'nodes', nodeName)
    mkdirSync(stateDir, {recursive: true})
    emulator = new Emulator({
      name: nodeName,
      kubeconfig: kubeconfigPath(),
      stateDir,
      port: 0,
      manifestsDir: dir,
      shutdownGraceSeconds: 2,
      provider: () => (provider = new TestProvider()),
    })
    emulator.on('error', (m) => errors.push(m))
    await emulator.start()
  })

  afterAll(async () => {
    await emulator?.stop({rm: true})
    // The mirror in "default" is owned by the Node (garbage collected with it); do not wait for that.
    await c?.core.deleteNamespacedPod({name: web, namespace: 'default', gracePeriodSeconds: 0}).catch(() => undefined)
    await deleteNamespace(c?.core, ns)
    rmSync(dir, {recursive: true, force: true})
  })

  const read = (name: string, namespace: string) => c.core.readNamespacedPod({name, namespace})
  const running = (name: string, namespace: string, ok: (p: V1Pod) => boolean = () => true) =>
    waitFor(
      async () => {
        const p = await read(name, namespace)
        return p.status?.phase === 'Running' && ok(p) ? p : undefined
      },
      `${namespace}/${name} Running`,
      20_000,
      100,
    )
  const gone = (name: string, namespace: string) =>
    waitFor(
      async () => {
        try {
          await read(name, namespace)
          return false
        } catch (error) {
          return (error as {code?: number}).code === 404
        }
      },
      `${namespace}/${name} gone`,
      20_000,
      100,
    )

  test('both manifests run; their mirror pods carry the config annotations and are owned by the Node', async () => {
    const node = await c.core.readNode({name: nodeName})
    for (const [name, namespace] of [
      [web, 'default'],
      [db, ns],
    ]) {
      const m = await running(name, namespace)
      const a = m.metadata!.annotations!
      expect(a[Mirror]).toMatch(/^[0-9a-f]{32}$/)
      expect(a[Hash]).toBe(a[Mirror])
      expect(a['kubernetes.io/config.source']).toBe('file')
      expect(new Date(a['kubernetes.io/config.seen']).getTime()).toBeGreaterThan(Date.now() - 120_000)
      expect(m.metadata!.ownerReferences).toEqual([{apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata!.uid, controller: true}])
      expect(m.spec!.nodeName).toBe(nodeName)
      // The mirror has its own UID; the pod the provider runs has the hash.
      expect(m.metadata!.uid).not.toBe(a[Hash])
      expect(provider.calls.filter((x) => x.op === 'create' && x.uid === a[Hash])).toHaveLength(1)
      expect(m.status!.containerStatuses![0].state!.running).toBeDefined()
    }
    const get = await kubectl(['get', 'pod', web, '-n', 'default', '--no-headers'])
    expect(get.stdout).toMatch(new RegExp(`^${web}\\s+1/1\\s+Running\\s+0\\s`))
  })

  test('a mirror deleted with kubectl comes back; the static pod keeps running', async () => {
    const before = await running(web, 'default')
    // --wait=false: the node deletes the mirror and makes the next one within milliseconds (the kubelet's
    // syncPod does both in one pass), and kubectl's wait can miss a delete followed that fast by a
    // recreate of the same name (its informer's list may come after both). The test waits for the new UID.
    const r = await kubectl(['delete', 'pod', web, '-n', 'default', '--wait=false'])
    expect({exitCode: r.exitCode, stderr: r.stderr, errors}).toEqual({exitCode: 0, stderr: '', errors: []})
    const after = await running(web, 'default', (p) => p.metadata!.uid !== before.metadata!.uid)
    expect(after.metadata!.annotations![Mirror]).toBe(before.metadata!.annotations![Mirror])
    const hash = before.metadata!.annotations![Hash]
    expect(provider.calls.filter((x) => x.uid === hash).map((x) => x.op)).toEqual(['create'])
  })

  test('editing a manifest replaces the pod: a new UID runs, the old one was terminated', async () => {
    const before = await running(web, 'default')
    const oldHash = before.metadata!.annotations![Hash]
    writeFileSync(join(dir, 'web.yaml'), manifest('web', undefined, {EDITED: '1'}))
    const after = await running(web, 'default', (p) => p.metadata!.annotations![Hash] !== oldHash)
    const newHash = after.metadata!.annotations![Hash]
    expect(after.metadata!.annotations![Mirror]).toBe(newHash)
    expect(after.metadata!.uid).not.toBe(before.metadata!.uid)
    expect(after.spec!.containers[0].env).toEqual([{name: 'EDITED', value: '1'}])
    const kill = provider.calls.find((x) => x.op === 'delete' && x.uid === oldHash)
    const start = provider.calls.find((x) => x.op === 'create' && x.uid === newHash)
    expect(kill).toBeDefined()
    expect(start!.at).toBeGreaterThanOrEqual(kill!.at)
    // The provider holds only the new generation of the pod; the node has forgotten the old one.
    const held = (await provider.getPods()).filter((p) => p.metadata!.name === web).map((p) => p.metadata!.uid)
    expect(held).toEqual([newHash])
    await waitFor(() => !emulator.pods().some((p) => p.metadata!.uid === oldHash), 'the old pod forgotten', 10_000, 50)
  })

  test('an invalid manifest is skipped with a Warning on the Node naming the file and the problem; the rest runs on', async () => {
    writeFileSync(join(dir, 'broken.yaml'), 'apiVersion: v1\nkind: Pod\nspec: [oops')
    writeFileSync(join(dir, 'secret.yaml'), `${manifest('sneaky', ns)}  volumes: [{name: creds, secret: {secretName: creds}}]\n`)
    const events = await waitFor(
      async () => {
        const list = await c.core.listNamespacedEvent({namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${nodeName},reason=FailedValidation`})
        return list.items.length >= 2 ? list.items : undefined
      },
      'two Warning events on the Node',
      20_000,
      200,
    )
    const messages = events.map((e) => e.message).sort()
    expect(events.every((e) => e.type === 'Warning')).toBe(true)
    expect(messages[0]).toMatch(new RegExp(`^static pod manifest ${join(dir, 'broken.yaml')} skipped: cannot parse: `))
    expect(messages[1]).toBe(`static pod manifest ${join(dir, 'secret.yaml')} skipped: spec.volumes[0].secret: static pods may not reference secrets`)
    expect(errors).toEqual(expect.arrayContaining(messages))
    const byKubectl = await kubectl(['get', 'events', '-n', 'default', '--field-selector', `involvedObject.name=${nodeName},reason=FailedValidation`, '--no-headers'])
    expect(byKubectl.stdout).toMatch(/broken\.yaml skipped/)
    await expect(read(`sneaky-${nodeName}`, ns)).rejects.toMatchObject({code: 404})
    await running(web, 'default')
    await running(db, ns)
    rmSync(join(dir, 'broken.yaml'))
    rmSync(join(dir, 'secret.yaml'))
  })

  test('API pods and static pods run side by side', async () => {
    await c.core.createNamespacedPod({namespace: ns, body: {metadata: {name: 'api-pod'}, spec: {nodeName, containers: [{name: 'app', image: 'busybox'}]}}})
    await running('api-pod', ns)
    const list = await kubectl(['get', 'pods', '-n', ns, '--no-headers', '-o', 'custom-columns=NAME:.metadata.name,STATUS:.status.phase,MIRROR:.metadata.annotations.kubernetes\\.io/config\\.mirror'])
    const rows = list.stdout
      .trim()
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
    expect(rows).toEqual(
      expect.arrayContaining([
        ['api-pod', 'Running', '<none>'],
        [db, 'Running', expect.stringMatching(/^[0-9a-f]{32}$/)],
      ]),
    )
    // The mirror is not run as a pod of its own: the provider runs exactly the two static pods and the API pod.
    const live = (await provider.getPods()).map((p) => p.metadata!.name).sort()
    expect(live).toEqual(['api-pod', db, web].sort())
    await c.core.deleteNamespacedPod({name: 'api-pod', namespace: ns})
    await gone('api-pod', ns)
  })

  test('removing a manifest terminates the pod and deletes its mirror', async () => {
    const m = await running(db, ns)
    const hash = m.metadata!.annotations![Hash]
    rmSync(join(dir, 'db.json'))
    await gone(db, ns)
    expect(provider.calls.some((x) => x.op === 'delete' && x.uid === hash)).toBe(true)
    await waitFor(() => provider.calls.some((x) => x.op === 'cleanup' && x.uid === hash), 'the pod cleaned up', 10_000, 50)
    expect(emulator.pods().map((p) => p.metadata!.uid)).not.toContain(hash)
    // It stays gone (no mirror comes back) and the other one runs on.
    await new Promise((r) => setTimeout(r, 500))
    await expect(read(db, ns)).rejects.toMatchObject({code: 404})
    await running(web, 'default')
  })
})

describeE2e('an empty or missing manifest directory still counts as seen', () => {
  let c: Clients
  const ns = uniqueName('static-empty')

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await deleteNamespace(c?.core, ns)
  })

  test.each([
    ['empty', true],
    ['missing', false],
  ])('with an %s directory, a mirror left without a static pod is cleaned up', async (_what, make) => {
    const nodeName = uniqueName('staticempty')
    const dir = join(runDir(), 'manifests', nodeName)
    if (make) mkdirSync(dir, {recursive: true})
    // A mirror pod for this node from an earlier run whose manifest is gone (it is deleted only once every source has been seen).
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {metadata: {name: `old-${nodeName}`, annotations: {[Mirror]: 'f'.repeat(32), [Hash]: 'f'.repeat(32)}}, spec: {nodeName, containers: [{name: 'app', image: 'busybox'}]}},
    })
    const stateDir = join(runDir(), 'nodes', nodeName)
    mkdirSync(stateDir, {recursive: true})
    let provider: TestProvider | undefined
    const watchers = inotifyWatches
    const watchersBefore = watchers()
    const emulator = new Emulator({name: nodeName, kubeconfig: kubeconfigPath(), stateDir, port: 0, manifestsDir: dir, shutdownGraceSeconds: 1, provider: () => (provider = new TestProvider())})
    let stopped = false
    try {
      await emulator.start()
      await waitFor(
        async () => {
          try {
            await c.core.readNamespacedPod({name: `old-${nodeName}`, namespace: ns})
            return false
          } catch (error) {
            return (error as {code?: number}).code === 404
          }
        },
        'the orphaned mirror deleted',
        15_000,
        100,
      )
      expect(provider!.calls).toEqual([])
      // An existing directory is watched (a missing one is looked for by the periodic listing).
      expect(watchers()).toBe(watchersBefore + (make ? 1 : 0))
      await emulator.stop({rm: true})
      stopped = true
      // Stopped: the directory watch is closed (checked before the directory goes, which would drop it anyway).
      expect(watchers()).toBe(watchersBefore)
    } finally {
      if (!stopped) await emulator.stop({rm: true})
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
