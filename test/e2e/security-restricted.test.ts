import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, rmSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, runDir, stopAllVnodes} from './helpers.js'

/**
 * A pod PodSecurity's `restricted` level admits runs, and cannot write
 * anywhere on the host outside its volumes. Needs the container's own
 * writable layer over a read-only host root (the walls-fs work): without it
 * a non-root container still writes to the host's world-writable
 * directories (/tmp, /var/tmp).
 */
describeE2e('a restricted pod: runs, and writes reach the host only through its volumes', () => {
  const f = new KubectlFixture('restricted')
  const marker = `vnode-restricted-marker-${process.pid}-${Date.now()}`
  /** Host directories a process of another user could write to, and where the test itself writes. */
  const places = ['/tmp', '/var/tmp', '/opt', '/etc', '/usr/local', '/root', homedir(), runDir()]
  const markers = places.map((p) => join(p, marker))

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
    await f.c.core.patchNamespace(
      {name: f.ns, body: {metadata: {labels: {'pod-security.kubernetes.io/enforce': 'restricted'}}}},
      (await import('@kubernetes/client-node')).setHeaderOptions('Content-Type', 'application/merge-patch+json'),
    )
  })
  afterAll(async () => {
    for (const m of markers) rmSync(m, {force: true})
    await f.tearDown()
    await stopAllVnodes()
  })

  test('admitted by PodSecurity restricted; every write outside its emptyDir stays off the host', async () => {
    const script = [...markers.map((m) => `touch ${m} 2>/dev/null && echo wrote ${m}`), 'touch /scratch/kept && echo volume-ok', 'true'].join('; ')
    // Created without the fixture's out dir: PodSecurity restricted refuses a hostPath volume.
    await f.c.core.createNamespacedPod({
      namespace: f.ns,
      body: {
        metadata: {name: 'restricted'},
        spec: {
          nodeName: f.nodeName,
          restartPolicy: 'Never',
          securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: 'RuntimeDefault'}},
          volumes: [{name: 'scratch', emptyDir: {}}],
          containers: [
            {
              name: 'main',
              image: 'sh',
              command: ['/bin/sh', '-c', script],
              securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}},
              volumeMounts: [{name: 'scratch', mountPath: '/scratch'}],
            },
          ],
        },
      },
    })
    await f.waitRow('restricted', (r) => r.status === 'Completed', 'to complete')
    const out = (await f.logs('restricted')).stdout
    expect(out).toMatch(/^volume-ok$/m)
    expect(markers.filter((m) => existsSync(m))).toEqual([])
  })
})
