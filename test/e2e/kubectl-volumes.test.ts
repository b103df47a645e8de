import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync} from 'node:fs'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName} from './helpers.js'

/**
 * Reports what the container sees under its volume root (argv[3]) to argv[2]:
 * file contents, modes, whether a read-only volume refuses a write, and an
 * emptyDir round trip.
 */
const volumeReport = `
const fs = require('fs'); const path = require('path');
const [out, root] = [process.argv[2], process.argv[3]];
const read = (p) => fs.readFileSync(path.join(root, p), 'utf8');
const mode = (p) => (fs.statSync(path.join(root, p)).mode & 0o777).toString(8);
let readOnly = 'writable';
try { fs.writeFileSync(path.join(root, 'etc/config/new'), 'x') } catch (e) { readOnly = e.code }
fs.writeFileSync(path.join(root, 'scratch/note'), 'kept');
const report = {
  root, cwd: process.cwd(), uid: process.getuid(),
  level: read('etc/config/LEVEL'), renamed: read('etc/config/conf/app.yaml'), renamedMode: mode('etc/config/conf/app.yaml'),
  password: read('etc/creds/password'), passwordMode: mode('etc/creds/password'), credsDirMode: mode('etc/creds'),
  credsReal: fs.realpathSync(path.join(root, 'etc/creds/password')),
  scratch: read('scratch/note'),
  labels: read('etc/podinfo/labels'), name: read('etc/podinfo/name'), cpu: read('etc/podinfo/cpu_limit'),
  readOnly,
};
fs.writeFileSync(out, JSON.stringify(report));
setInterval(() => {}, 1000);
`

describeE2e('kubectl: volumes as the process sees them', () => {
  const f = new KubectlFixture('kvol')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('configMap, secret, emptyDir and downwardAPI volumes under $(VNODE_VOLUME_ROOT); secrets 0600 in owner-only directories, removed with the pod', async () => {
    await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: 'app-config'}, data: {LEVEL: 'debug', 'app.yaml': 'port: 8080\n'}}})
    await f.c.core.createNamespacedSecret({namespace: f.ns, body: {metadata: {name: 'creds'}, stringData: {password: 's3cret'}}})
    const marker = uniqueName('vol')
    await f.create({
      metadata: {name: 'vols', labels: {app: 'shop', tier: 'web'}},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [
          {
            name: 'config',
            configMap: {
              name: 'app-config',
              items: [
                {key: 'LEVEL', path: 'LEVEL'},
                {key: 'app.yaml', path: 'conf/app.yaml', mode: 0o640},
              ],
            },
          },
          {name: 'creds', secret: {secretName: 'creds'}},
          {name: 'scratch', emptyDir: {}},
          {
            name: 'podinfo',
            downwardAPI: {
              items: [
                {path: 'labels', fieldRef: {fieldPath: 'metadata.labels'}},
                {path: 'name', fieldRef: {fieldPath: 'metadata.name'}},
                {path: 'cpu_limit', resourceFieldRef: {containerName: 'app', resource: 'limits.cpu', divisor: '1m'}},
              ],
            },
          },
        ],
        containers: [
          markedContainer('app', volumeReport, marker, {
            args: [f.out('volumes.json'), '$(VNODE_VOLUME_ROOT)'],
            resources: {limits: {cpu: '500m'}},
            volumeMounts: [
              {name: 'config', mountPath: '/etc/config'},
              {name: 'creds', mountPath: '/etc/creds', readOnly: true},
              {name: 'scratch', mountPath: '/scratch'},
              {name: 'podinfo', mountPath: '/etc/podinfo'},
            ],
          }),
        ],
      },
    })
    const row = await f.waitRow('vols', (r) => r.status === 'Running', 'Running')
    expect(row).toMatchObject({ready: '1/1', restarts: 0})
    const r = JSON.parse(await f.file('volumes.json')) as Record<string, string | number>
    expect(r).toMatchObject({
      level: 'debug',
      renamed: 'port: 8080\n',
      renamedMode: '640',
      password: 's3cret',
      passwordMode: '600',
      // Owner-only like a 0700 directory, and read-only as a Secret volume is.
      credsDirMode: '500',
      scratch: 'kept',
      labels: 'app="shop"\ntier="web"',
      name: 'vols',
      cpu: '500',
    })
    expect(r.cwd).toBe(r.root)
    // ConfigMap volumes are read-only (root would bypass the permissions).
    if (r.uid !== 0) expect(r.readOnly).toBe('EACCES')
    expect(existsSync(r.credsReal as string)).toBe(true)

    await kubectl(['delete', 'pod', 'vols', '-n', f.ns])
    await f.gone('vols')
    await f.noProcess(marker)
    // The secret's content does not outlive the pod.
    expect(existsSync(r.credsReal as string)).toBe(false)
  })
})
