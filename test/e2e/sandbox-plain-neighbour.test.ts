import {afterAll, beforeAll, expect} from '@jest/globals'
import {existsSync, lstatSync} from 'node:fs'
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

  testWhen(root, "a plain pod's real symlink at a top-level mountPath needs root")(
    "the sandboxed pod's volume is its own at that path, writable by its user, while the plain pod's symlink is on the host",
    async () => {
      const volume = {name: 'scratch', emptyDir: {}}
      await f.c.core.createNamespacedPod({
        namespace: f.ns,
        body: {
          metadata: {name: 'plain'},
          spec: {
            nodeName: plainNode,
            terminationGracePeriodSeconds: 1,
            volumes: [volume],
            containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', 'trap "exit 0" TERM; sleep 3600 & wait'], volumeMounts: [{name: 'scratch', mountPath}]}],
          },
        },
      })
      await f.waitRow('plain', (r) => r.status === 'Running', 'the plain pod Running')
      // The precondition: the plain node's real symlink at the mountPath, on the host.
      expect(lstatSync(mountPath).isSymbolicLink()).toBe(true)

      await f.create({
        metadata: {name: 'sandboxed'},
        spec: {
          restartPolicy: 'Never',
          securityContext: {runAsUser: 1000, runAsGroup: 1000},
          volumes: [volume],
          containers: [{name: 'app', image: 'sh', command: ['/bin/sh', '-c', `touch ${mountPath}/kept && ls -A ${mountPath}`], volumeMounts: [{name: 'scratch', mountPath}]}],
        },
      })
      const row = await f.waitRow('sandboxed', (r) => r.status === 'Completed' || r.status === 'Error', 'the sandboxed pod ended')
      expect({status: row.status, logs: (await f.logs('sandboxed')).stdout}).toEqual({status: 'Completed', logs: 'kept'})

      await f.c.core.deleteNamespacedPod({name: 'plain', namespace: f.ns})
      await waitFor(() => !existsSync(mountPath) && !isLink(mountPath), "the plain pod's symlink removed with it", 30_000, 200)
    },
    90_000,
  )
})

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink()
  } catch {
    return false
  }
}
