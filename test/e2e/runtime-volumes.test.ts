import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeE2e, runDir, waitFor} from './helpers.js'
import {nodeContainer, RuntimeHarness} from './runtime-harness.js'

/** Reads the given paths (relative to $VNODE_VOLUME_ROOT unless absolute) into $OUT as JSON, and tries a write to each WRITE path. */
const READER = `const fs=require('fs'),p=require('path');const r={};for(const f of process.env.FILES.split(',')){try{r[f]=fs.readFileSync(p.isAbsolute(f)?f:p.join(process.env.VNODE_VOLUME_ROOT,f),'utf8')}catch(e){r[f]='ERR '+e.code}}
for(const w of (process.env.WRITES||'').split(',').filter(Boolean)){try{fs.writeFileSync(p.join(process.env.VNODE_VOLUME_ROOT,w),'x');r['write:'+w]='ok'}catch(e){r['write:'+w]='ERR '+e.code}}
fs.writeFileSync(process.env.OUT+'.tmp',JSON.stringify(r));fs.renameSync(process.env.OUT+'.tmp',process.env.OUT);setInterval(()=>{},1000)`

describeE2e('runtime: volumes', () => {
  const h = new RuntimeHarness()
  let out: string
  beforeAll(async () => {
    await h.setUp({configRetry: {initialMs: 300, maxMs: 1000}})
    out = mkdtempSync(join(runDir(), 'rt-vol-'))
  })
  afterAll(() => h.tearDown())

  const report = (name: string) => waitFor(() => existsSync(join(out, name)) && (JSON.parse(readFileSync(join(out, name), 'utf8')) as Record<string, string>), `report ${name}`, 20_000, 50)

  test('configMap (items, mode), secret (0600 in 0700), downwardAPI, projected, emptyDir, hostPath, subPath: found under $VNODE_VOLUME_ROOT/<mountPath>', async () => {
    const {core} = h.c
    await core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'app-config'}, data: {'settings.yaml': 'a: 1', other: 'o'}}})
    await core.createNamespacedSecret({namespace: h.ns, body: {metadata: {name: 'app-secret'}, stringData: {password: 's3cret'}}})
    const host = join(out, 'hostdir')
    const pod = await h.run({
      metadata: {name: 'vols', labels: {tier: 'web'}, annotations: {note: 'hi'}},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [
          {name: 'cfg', configMap: {name: 'app-config', items: [{key: 'settings.yaml', path: 'conf/settings.yaml', mode: 0o640}]}},
          {name: 'sec', secret: {secretName: 'app-secret'}},
          {
            name: 'info',
            downwardAPI: {
              items: [
                {path: 'labels', fieldRef: {fieldPath: 'metadata.labels'}},
                {path: 'name', fieldRef: {fieldPath: 'metadata.name'}},
              ],
            },
          },
          {
            name: 'all',
            projected: {sources: [{configMap: {name: 'app-config', items: [{key: 'other', path: 'other'}]}}, {downwardAPI: {items: [{path: 'ns', fieldRef: {fieldPath: 'metadata.namespace'}}]}}]},
          },
          {name: 'scratch', emptyDir: {}},
          {name: 'host', hostPath: {path: host, type: 'DirectoryOrCreate'}},
        ],
        containers: [
          nodeContainer('app', READER, {
            env: [
              {name: 'OUT', value: join(out, 'vols.json')},
              {name: 'FILES', value: 'etc/app/conf/settings.yaml,etc/secret/password,etc/info/labels,etc/info/name,etc/all/other,etc/all/ns,data/sub/from-writer'},
              {name: 'WRITES', value: 'etc/app/new-file,scratch/ok'},
            ],
            volumeMounts: [
              {name: 'cfg', mountPath: '/etc/app'},
              {name: 'sec', mountPath: '/etc/secret'},
              {name: 'info', mountPath: '/etc/info'},
              {name: 'all', mountPath: '/etc/all'},
              {name: 'scratch', mountPath: '/scratch'},
              {name: 'host', mountPath: '/data', subPath: 'nested'},
            ],
          }),
        ],
        initContainers: [
          nodeContainer('writer', `require('fs').mkdirSync('data/sub',{recursive:true});require('fs').writeFileSync('data/sub/from-writer','written by init')`, {
            volumeMounts: [{name: 'host', mountPath: '/data', subPath: 'nested'}],
          }),
        ],
      },
    })
    const r = await report('vols.json')
    expect(r).toEqual({
      'etc/app/conf/settings.yaml': 'a: 1',
      'etc/secret/password': 's3cret',
      'etc/info/labels': 'tier="web"',
      'etc/info/name': 'vols',
      'etc/all/other': 'o',
      'etc/all/ns': h.ns,
      'data/sub/from-writer': 'written by init',
      // Read-only is enforced by permissions, which root bypasses (checked on the mode below).
      'write:etc/app/new-file': process.getuid?.() === 0 ? 'ok' : 'ERR EACCES',
      'write:scratch/ok': 'ok',
    })
    const sandbox = join(h.stateDir, 'pods', pod.metadata!.uid!)
    expect(statSync(join(sandbox, 'volumes', 'cfg', 'conf', 'settings.yaml')).mode & 0o777).toBe(0o640)
    expect(statSync(join(sandbox, 'volumes', 'sec', 'password')).mode & 0o777).toBe(0o600)
    expect(statSync(join(sandbox, 'volumes', 'sec')).mode & 0o077).toBe(0)
    expect(statSync(sandbox).mode & 0o777).toBe(0o700)
    expect(statSync(join(sandbox, 'volumes', 'cfg')).mode & 0o777).toBe(0o555)
    expect(statSync(join(sandbox, 'volumes', 'scratch')).mode & 0o200).toBe(0o200)
    expect(readFileSync(join(host, 'nested', 'sub', 'from-writer'), 'utf8')).toBe('written by init')
  })

  test('a mountPath the user can create becomes a real symlink, removed with the pod; an existing path is never replaced', async () => {
    const free = join(out, 'mnt-free')
    const taken = join(out, 'mnt-taken')
    mkdirSync(taken)
    writeFileSync(join(taken, 'mine'), 'keep')
    const pod = await h.run({
      metadata: {name: 'links'},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [{name: 'scratch', emptyDir: {}}],
        containers: [
          nodeContainer('app', `require('fs').writeFileSync('${free}/hello','via real path');setInterval(()=>{},1000)`, {
            volumeMounts: [
              {name: 'scratch', mountPath: free},
              {name: 'scratch', mountPath: taken},
            ],
          }),
        ],
      },
    })
    await h.waitContainer('links', 'app', (c) => !!c.state?.running, 'running')
    await waitFor(() => existsSync(join(free, 'hello')), 'write through the real mountPath')
    expect(lstatSync(free).isSymbolicLink()).toBe(true)
    expect(readFileSync(join(h.stateDir, 'pods', pod.metadata!.uid!, 'volumes', 'scratch', 'hello'), 'utf8')).toBe('via real path')
    expect(lstatSync(taken).isDirectory()).toBe(true)
    await h.provider.deletePod(pod, 2)
    await h.provider.cleanupPod(pod)
    expect(existsSync(free)).toBe(false)
    expect(readFileSync(join(taken, 'mine'), 'utf8')).toBe('keep')
  })

  test('a missing ConfigMap volume: FailedMount, ContainerCreating, then it runs once the ConfigMap exists', async () => {
    await h.run({
      metadata: {name: 'mountwait'},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [{name: 'c', configMap: {name: 'comes-later'}}],
        containers: [nodeContainer('app', 'setInterval(()=>{},1000)', {volumeMounts: [{name: 'c', mountPath: '/c'}]})],
      },
    })
    const e = await h.waitEvent('mountwait', (x) => x.reason === 'FailedMount', 'FailedMount')
    expect(e).toMatchObject({type: 'Warning', message: 'MountVolume.SetUp failed for volume "c" : configmap "comes-later" not found'})
    expect(h.container('mountwait', 'app')!.state!.waiting!.reason).toBe('ContainerCreating')
    await h.c.core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'comes-later'}, data: {k: 'v'}}})
    await h.waitContainer('mountwait', 'app', (c) => !!c.state?.running, 'running', 15_000)
  })

  test('path traversal through subPath or item paths is refused (pods handed over directly, bypassing API validation)', async () => {
    await h.c.core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'trav'}, data: {k: 'v'}}})
    const base = await h.apiPod({
      metadata: {name: 'trav-sub'},
      spec: {terminationGracePeriodSeconds: 2, volumes: [{name: 's', emptyDir: {}}], containers: [nodeContainer('app', 'setInterval(()=>{},1000)', {volumeMounts: [{name: 's', mountPath: '/s'}]})]},
    })
    const evilSub: V1Pod = structuredClone(base)
    evilSub.spec!.containers[0].volumeMounts![0].subPath = '../../../../escape'
    await h.provider.createPod(evilSub)
    const c = await h.waitContainer('trav-sub', 'app', (x) => x.state?.waiting?.reason === 'CreateContainerConfigError', 'refused subPath')
    expect(c.state!.waiting!.message).toContain(`subPath "../../../../escape": must not contain '..'`)

    const base2 = await h.apiPod({
      metadata: {name: 'trav-item'},
      spec: {
        volumes: [{name: 'c', configMap: {name: 'trav', items: [{key: 'k', path: 'ok'}]}}],
        containers: [nodeContainer('app', 'setInterval(()=>{},1000)', {volumeMounts: [{name: 'c', mountPath: '/c'}]})],
      },
    })
    const evilItem: V1Pod = structuredClone(base2)
    evilItem.spec!.volumes![0].configMap!.items![0].path = '../../../../evil'
    await h.provider.createPod(evilItem)
    const e = await h.waitEvent('trav-item', (x) => x.reason === 'FailedMount', 'FailedMount for traversal')
    expect(e.message).toBe(`MountVolume.SetUp failed for volume "c" : item path "../../../../evil": must not contain '..'`)
    expect(existsSync(join(h.stateDir, 'evil'))).toBe(false)
    expect(existsSync(join(h.stateDir, 'pods', 'evil'))).toBe(false)
  })

  test('the service account token volume the API adds (projected token, CA, namespace) is materialised', async () => {
    const pod = await h.run({
      metadata: {name: 'sa'},
      spec: {
        automountServiceAccountToken: true,
        terminationGracePeriodSeconds: 2,
        containers: [
          nodeContainer('app', READER, {
            env: [
              {name: 'OUT', value: join(out, 'sa.json')},
              {name: 'FILES', value: 'var/run/secrets/kubernetes.io/serviceaccount/namespace,var/run/secrets/kubernetes.io/serviceaccount/token,var/run/secrets/kubernetes.io/serviceaccount/ca.crt'},
            ],
          }),
        ],
      },
    })
    expect(pod.spec!.volumes!.some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken))).toBe(true)
    const r = await report('sa.json')
    const dir = 'var/run/secrets/kubernetes.io/serviceaccount'
    expect(r[`${dir}/namespace`]).toBe(h.ns)
    expect(r[`${dir}/token`].split('.')).toHaveLength(3)
    expect(r[`${dir}/ca.crt`]).toContain('BEGIN CERTIFICATE')
  })
})
