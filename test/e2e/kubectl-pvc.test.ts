import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/** PersistentVolumeClaims: static hostPath and local PVs, read-only claims, PV types vnode cannot mount. */
describeE2e('kubectl: persistent volumes', () => {
  const f = new KubectlFixture('kpvc')
  const pvs: string[] = []

  /** A static PV of this test (cluster-scoped: deleted in afterAll). */
  async function pv(name: string, spec: Record<string, unknown>): Promise<void> {
    pvs.push(name)
    const body = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: {name},
      spec: {capacity: {storage: '1Gi'}, accessModes: ['ReadWriteOnce'], persistentVolumeReclaimPolicy: 'Retain', storageClassName: '', ...spec},
    }
    const r = await kubectl(['apply', '-f', '-'], JSON.stringify(body))
    expect(r.stderr).toBe('')
  }

  async function claim(name: string, volumeName: string, accessModes = ['ReadWriteOnce']): Promise<void> {
    const body = {apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: {name, namespace: f.ns}, spec: {storageClassName: '', volumeName, accessModes, resources: {requests: {storage: '1Gi'}}}}
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(body))).stderr).toBe('')
    await waitFor(async () => (await kubectl(['get', 'pvc', name, '-n', f.ns, '-o', 'jsonpath={.status.phase}'])).stdout === 'Bound', `claim ${name} Bound`, 60_000, 300)
  }

  beforeAll(async () => {
    // No default taint: the StatefulSet's pods (no toleration) land on this node. The sandbox, so a
    // read-only claim is enforced (a bare host process cannot be kept from writing, as for hostPath).
    await f.setUp(['--no-default-taint', '--sandbox', 'namespaces'])
  })
  afterAll(async () => {
    await kubectl(['delete', 'statefulset', '--all', '-n', f.ns, '--wait=false'])
    await f.tearDown()
    if (pvs.length) await kubectl(['delete', 'pv', ...pvs, '--wait=false'])
    await stopAllVnodes()
  })

  test('a StatefulSet with volumeClaimTemplates runs on static hostPath PVs; a new pod of the set finds its data', async () => {
    const dirs = [0, 1].map((i) => f.out(`pv-${i}`))
    for (const [i, d] of dirs.entries()) {
      mkdirSync(d, {recursive: true})
      // Each PV is pre-bound to the claim the StatefulSet will make for its ordinal.
      await pv(uniqueName(`web-${i}`), {hostPath: {path: d, type: 'Directory'}, claimRef: {namespace: f.ns, name: `data-web-${i}`}})
    }
    const sts = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {name: 'web', namespace: f.ns},
      spec: {
        serviceName: 'web',
        replicas: 2,
        selector: {matchLabels: {app: 'web'}},
        template: {
          metadata: {labels: {app: 'web'}},
          spec: {
            // Other files' nodes without the default taint run beside this one: the set's pods select this node.
            nodeSelector: {'kubernetes.io/hostname': f.nodeName},
            terminationGracePeriodSeconds: 2,
            containers: [
              {
                name: 'app',
                image: 'busybox',
                // `data` is the mount relative to the default working directory, in both sandbox modes.
                args: ['sh', '-c', 'cd data && echo "$HOSTNAME" >> seen && exec sleep 3600'],
                volumeMounts: [{name: 'data', mountPath: '/data'}],
              },
            ],
          },
        },
        volumeClaimTemplates: [{metadata: {name: 'data'}, spec: {accessModes: ['ReadWriteOnce'], storageClassName: '', resources: {requests: {storage: '1Gi'}}}}],
      },
    }
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(sts))).stderr).toBe('')
    for (const i of [0, 1]) await f.waitRow(`web-${i}`, (r) => r.status === 'Running' && r.ready === '1/1', 'Running 1/1', 60_000)
    for (const i of [0, 1]) expect(await f.jsonpath(`web-${i}`, '{.spec.nodeName}')).toBe(f.nodeName)
    for (const [i, d] of dirs.entries()) await waitFor(() => existsSync(join(d, 'seen')) && readFileSync(join(d, 'seen'), 'utf8') === `web-${i}\n`, `web-${i} writing to its PV`)
    // The set makes web-0 anew: it gets the same claim, so the same data.
    const oldUid = await f.jsonpath('web-0', '{.metadata.uid}')
    await kubectl(['delete', 'pod', 'web-0', '-n', f.ns, '--wait=false'])
    await waitFor(
      async () => {
        const row = await f.row('web-0')
        return row?.status === 'Running' && (await f.jsonpath('web-0', '{.metadata.uid}')) !== oldUid
      },
      'a new web-0 running',
      60_000,
      300,
    )
    await waitFor(() => readFileSync(join(dirs[0], 'seen'), 'utf8') === 'web-0\nweb-0\n', 'the new web-0 appending to the same PV')
    expect(readFileSync(join(dirs[1], 'seen'), 'utf8')).toBe('web-1\n')
    await kubectl(['delete', 'statefulset', 'web', '-n', f.ns, '--wait=false'])
    await f.gone('web-0')
    await f.gone('web-1')
  })

  test('a local PV is mounted, through a readOnly claim volume', async () => {
    const dir = f.out('local')
    mkdirSync(dir, {recursive: true})
    writeFileSync(join(dir, 'greeting'), 'hello from a local PV')
    const name = uniqueName('local')
    await pv(name, {local: {path: dir}, nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: 'kubernetes.io/hostname', operator: 'In', values: [f.nodeName]}]}]}}})
    await claim('local', name)
    await f.create({
      metadata: {name: 'reader'},
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 2,
        containers: [
          {
            name: 'app',
            image: 'busybox',
            args: ['sh', '-c', 'cat data/greeting; echo; touch data/new 2>/dev/null && echo writable || echo read-only'],
            volumeMounts: [{name: 'data', mountPath: '/data'}],
          },
        ],
        volumes: [{name: 'data', persistentVolumeClaim: {claimName: 'local', readOnly: true}}],
      },
    })
    await f.waitRow('reader', (r) => r.status === 'Completed', 'Completed')
    const out = (await f.logs('reader')).stdout.split('\n')
    expect(out[0]).toBe('hello from a local PV')
    // The sandbox binds it read-only.
    expect((await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.metadata.labels.vnode\\.dev/sandbox}'])).stdout).toBe('namespaces')
    expect(out[1]).toBe('read-only')
    expect(existsSync(join(dir, 'new'))).toBe(false)
    await kubectl(['delete', 'pod', 'reader', '-n', f.ns, '--wait=false'])
    await f.gone('reader')
  })

  test('a PV of a type vnode cannot mount, and a claim that is not bound: FailedMount naming why', async () => {
    const nfs = uniqueName('nfs')
    await pv(nfs, {nfs: {server: '127.0.0.1', path: '/exports/x'}})
    await claim('nfs', nfs)
    const pending = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: {name: 'pending', namespace: f.ns},
      spec: {storageClassName: 'none-such', accessModes: ['ReadWriteOnce'], resources: {requests: {storage: '1Gi'}}},
    }
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(pending))).stderr).toBe('')
    for (const [pod, claimName] of [
      ['on-nfs', 'nfs'],
      ['on-pending', 'pending'],
    ]) {
      await f.create({
        metadata: {name: pod},
        spec: {
          terminationGracePeriodSeconds: 2,
          containers: [{name: 'app', image: 'busybox', args: ['true'], volumeMounts: [{name: 'data', mountPath: '/data'}]}],
          volumes: [{name: 'data', persistentVolumeClaim: {claimName}}],
        },
      })
    }
    await f.waitDescribe(
      'on-nfs',
      new RegExp(`Warning\\s+FailedMount\\s+.*MountVolume.SetUp failed for volume "${nfs}" : PersistentVolume "${nfs}" has type nfs, which vnode cannot mount \\(supported: hostPath, local\\)`),
    )
    await f.waitDescribe('on-pending', new RegExp(`Warning\\s+FailedMount\\s+.*error processing PVC ${f.ns}/pending: PVC is not bound`))
    for (const pod of ['on-nfs', 'on-pending']) expect((await f.row(pod))?.status).toBe('ContainerCreating')
    await kubectl(['delete', 'pod', 'on-nfs', 'on-pending', '-n', f.ns, '--wait=false'])
    await f.gone('on-nfs')
    await f.gone('on-pending')
  })
})
