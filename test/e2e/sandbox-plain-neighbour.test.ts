import {afterAll, beforeAll, expect} from '@jest/globals'
import {existsSync, lstatSync, mkdirSync, rmSync, symlinkSync, unlinkSync} from 'node:fs'
import {join} from 'node:path'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, startVnode, stopAllVnodes, testWhen, uniqueName, type VnodeProcess, waitFor} from './helpers.js'

const root = process.getuid?.() === 0

/**
 * Two nodes on one host: a sandboxed one, then a plain one started after
 * it. As root, a plain pod's volume gets a real symlink at its mountPath on
 * the host, into that node's pod directory (owner-only). A sandboxed pod
 * mounting a volume at the same path must get its own volume there, never
 * a path into the other node's state dir that its user cannot enter.
 */
describeE2e('a sandboxed node beside a plain node started after it', () => {
  const f = new KubectlFixture('sbx-nb')
  const plainNode = uniqueName('plain-nb')
  const mountPath = `/${uniqueName('vnode-e2e-mount')}`
  let plain: VnodeProcess

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
    plain = startVnode(plainNode)
    await plain.ready()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
    await f.c.core.deleteNode({name: plainNode}).catch(() => undefined)
  })

  /**
   * A plain pod with its volume at `path` (its real symlink there, on the host), then a sandboxed pod of user 1000
   * writing to its own volume at the same path: it must find a directory of its own there, not the plain pod's link.
   */
  async function besidePlainLink(path: string, suffix: string): Promise<void> {
    const volume = {name: 'scratch', emptyDir: {}}
    const plainPod = `plain${suffix}`
    const sandboxed = `sandboxed${suffix}`
    await f.c.core.createNamespacedPod({
      namespace: f.ns,
      body: {
        metadata: {name: plainPod},
        spec: {
          nodeName: plainNode,
          terminationGracePeriodSeconds: 1,
          volumes: [volume],
          containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', 'trap "exit 0" TERM; sleep 3600 & wait'], volumeMounts: [{name: 'scratch', mountPath: path}]}],
        },
      },
    })
    await f.waitRow(plainPod, (r) => r.status === 'Running', 'the plain pod Running')
    // The precondition: the plain node's real symlink at the mountPath, on the host.
    expect(lstatSync(path).isSymbolicLink()).toBe(true)

    const script = `touch ${path}/kept && ls -A ${path} && test -d ${path} && ! test -L ${path} && echo not-a-link`
    await f.create({
      metadata: {name: sandboxed},
      spec: {
        restartPolicy: 'Never',
        securityContext: {runAsUser: 1000, runAsGroup: 1000},
        volumes: [volume],
        containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', script], volumeMounts: [{name: 'scratch', mountPath: path}]}],
      },
    })
    const row = await f.waitRow(sandboxed, (r) => r.status === 'Completed' || r.status === 'Error' || r.status === 'StartError', 'the sandboxed pod ended')
    expect({status: row.status, logs: (await f.logs(sandboxed)).stdout}).toEqual({status: 'Completed', logs: 'kept\nnot-a-link'})

    await f.c.core.deleteNamespacedPod({name: plainPod, namespace: f.ns})
    await waitFor(() => !existsSync(path) && !isLink(path), "the plain pod's symlink removed with it", 30_000, 200)
  }

  testWhen(root, "a plain pod's real symlink at a top-level mountPath needs root")(
    "the sandboxed pod's volume is its own at that path, writable by its user, while the plain pod's symlink is on the host",
    () => besidePlainLink(mountPath, ''),
    90_000,
  )

  testWhen(root, "a plain pod's real symlink in /etc needs root")(
    "a plain pod's real symlink deeper than the root (in /etc) is not followed either: the sandboxed pod's volume is its own there",
    () => besidePlainLink(`/etc/${uniqueName('vnode-e2e-mount')}`, '-deep'),
    90_000,
  )

  testWhen(root, 'a top-level symlink on the host needs root')(
    "a symlink the host makes at a top-level mountPath while sandboxed pods start never takes their volume: each pod's user writes to its own",
    async () => {
      // What the plain node does at its pod's start, at any moment: a real link at the mountPath into its owner-only
      // state dir. Here the link comes and goes every few milliseconds, so some starts plan their view without it and
      // meet it at their bind (before the fix: the bind followed it, into a path the pod's user cannot walk, or failed).
      const racePath = `/${uniqueName('vnode-e2e-race')}`
      const into = join(plain.stateDir, 'race-target')
      mkdirSync(into, {recursive: true, mode: 0o700})
      let linked = false
      const toggle = setInterval(() => {
        try {
          if (linked) unlinkSync(racePath)
          else symlinkSync(into, racePath)
          linked = !linked
        } catch {
          linked = isLink(racePath)
        }
      }, 3)
      const names = Array.from({length: 12}, (_, i) => `race-${i}`)
      try {
        for (const name of names)
          await f.create({
            metadata: {name},
            spec: {
              restartPolicy: 'Never',
              securityContext: {runAsUser: 1000, runAsGroup: 1000},
              volumes: [{name: 'scratch', emptyDir: {}}],
              containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', `touch ${racePath}/kept && ls -A ${racePath}`], volumeMounts: [{name: 'scratch', mountPath: racePath}]}],
            },
          })
        const ended: Record<string, {status: string; logs: string}> = {}
        for (const name of names) {
          const row = await f.waitRow(name, (r) => r.status === 'Completed' || r.status === 'Error' || r.status === 'StartError', `${name} ended`, 60_000)
          const logs = (await f.logs(name)).stdout
          // A start that failed says why in its status (bwrap's words), not in its logs.
          const why = row.status === 'Completed' ? undefined : (await f.c.core.readNamespacedPod({name, namespace: f.ns})).status?.containerStatuses?.[0]?.state?.terminated?.message
          ended[name] = {status: row.status, logs: why ?? logs}
        }
        expect(ended).toEqual(Object.fromEntries(names.map((n) => [n, {status: 'Completed', logs: 'kept'}])))
      } finally {
        clearInterval(toggle)
        rmSync(racePath, {force: true})
      }
      expect(isLink(racePath)).toBe(false)
    },
    120_000,
  )
})

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink()
  } catch {
    return false
  }
}
