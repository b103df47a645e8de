import {afterEach, describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {decodeStaticPod, FileSource, type ManifestProblem, MaxManifestBytes, readManifestDir, staticPodReferences} from '../../src/emulator/pods/file-source.js'

const yaml = (name: string, extra = '') => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  labels: {app: ${name}}
spec:
  containers:
  - name: app
    image: busybox:1.36
${extra}`

const dirs: string[] = []
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'vnode-static-'))
  dirs.push(d)
  return d
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, {recursive: true, force: true})
})

const until = async (fn: () => boolean, what: string, ms = 5_000) => {
  const end = Date.now() + ms
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('decoding a static pod manifest', () => {
  test('named <name>-<node>, namespace default, bound to the node, hash as UID and config.hash, NoExecute toleration, Pending', () => {
    const pod = decodeStaticPod(yaml('web'), '/m/web.yaml', 'Node-A')
    expect(pod.metadata).toMatchObject({name: 'web-node-a', namespace: 'default', labels: {app: 'web'}})
    expect(pod.metadata!.uid).toMatch(/^[0-9a-f]{32}$/)
    expect(pod.metadata!.annotations).toEqual({'kubernetes.io/config.hash': pod.metadata!.uid})
    expect(pod.spec!.nodeName).toBe('Node-A')
    expect(pod.spec!.tolerations).toEqual([{operator: 'Exists', effect: 'NoExecute'}])
    expect(pod.spec!.restartPolicy).toBe('Always')
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(30)
    expect(pod.spec!.containers[0].imagePullPolicy).toBe('IfNotPresent')
    expect(pod.status).toEqual({phase: 'Pending'})
  })

  test('the UID depends on the content, the node and the file, not on formatting', () => {
    const a = decodeStaticPod(yaml('web'), '/m/web.yaml', 'n1').metadata!.uid
    const json = JSON.stringify({kind: 'Pod', apiVersion: 'v1', spec: {containers: [{image: 'busybox:1.36', name: 'app'}]}, metadata: {labels: {app: 'web'}, name: 'web'}})
    expect(decodeStaticPod(json, '/m/web.yaml', 'n1').metadata!.uid).toBe(a)
    expect(decodeStaticPod(`# a comment\n${yaml('web')}`, '/m/web.yaml', 'n1').metadata!.uid).toBe(a)
    expect(decodeStaticPod(yaml('web', '  restartPolicy: Never\n'), '/m/web.yaml', 'n1').metadata!.uid).not.toBe(a)
    expect(decodeStaticPod(yaml('web'), '/m/web.yaml', 'n2').metadata!.uid).not.toBe(a)
    expect(decodeStaticPod(yaml('web'), '/m/other.yaml', 'n1').metadata!.uid).not.toBe(a)
  })

  test('a namespace in the manifest is kept', () => {
    const pod = decodeStaticPod(yaml('web').replace('  name: web', '  name: web\n  namespace: team-a'), '/m/web.yaml', 'n1')
    expect(pod.metadata!.namespace).toBe('team-a')
  })

  test.each([
    ['garbage', 'key: [unclosed', /^cannot parse: /],
    ['empty', '', /^cannot parse: /],
    ['not a pod', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n', /^not a Pod: expected apiVersion v1, kind Pod \(got v1\/ConfigMap\)/],
    ['two documents', `${yaml('a')}---\n${yaml('b')}`, /^cannot parse: /],
    ['no name', 'apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n', /^invalid pod: name is needed for the pod$/],
    ['no containers', 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n', /^spec.containers: Required value$/],
    ['no image', 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}\n', /^spec.containers\[0\].image: Required value$/],
    ['bad name', 'apiVersion: v1\nkind: Pod\nmetadata: {name: Web_1}\nspec: {containers: [{name: a, image: b}]}\n', /^metadata.name: invalid value "Web_1-n1"/],
    ['duplicate container', 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a, image: c}]}\n', /Duplicate value "a"/],
    ['bad restart policy', yaml('x', '  restartPolicy: Sometimes\n'), /^spec.restartPolicy: Unsupported value "Sometimes"/],
  ])('%s is refused with the problem', (_what, text, message) => {
    expect(() => decodeStaticPod(text, '/m/f.yaml', 'n1')).toThrow(message)
  })

  test.each([
    ['a secret volume', {volumes: [{name: 'v', secret: {secretName: 's'}}]}, 'spec.volumes[0].secret: static pods may not reference secrets'],
    ['a configmap volume', {volumes: [{name: 'v', configMap: {name: 'c'}}]}, 'spec.volumes[0].configMap: static pods may not reference configmaps'],
    [
      'a token projection',
      {volumes: [{name: 'v', projected: {sources: [{serviceAccountToken: {path: 't'}}]}}]},
      'spec.volumes[0].projected.sources[0].serviceAccountToken: static pods may not reference serviceaccounts',
    ],
    ['a service account', {serviceAccountName: 'builder'}, 'spec.serviceAccountName: static pods may not reference serviceaccounts'],
    ['a claim', {volumes: [{name: 'v', persistentVolumeClaim: {claimName: 'c'}}]}, 'spec.volumes[0].persistentVolumeClaim: static pods may not reference persistentvolumeclaims'],
    [
      'a secret env',
      {containers: [{name: 'a', image: 'b', env: [{name: 'X', valueFrom: {secretKeyRef: {name: 's', key: 'k'}}}]}]},
      'spec.containers[0].env[0].valueFrom.secretKeyRef: static pods may not reference secrets',
    ],
    ['a configmap envFrom', {containers: [{name: 'a', image: 'b', envFrom: [{configMapRef: {name: 'c'}}]}]}, 'spec.containers[0].envFrom[0].configMapRef: static pods may not reference configmaps'],
  ])('a pod referencing %s is refused', (_what, spec, message) => {
    const pod = {metadata: {name: 'x'}, spec: {containers: [{name: 'a', image: 'b'}], ...spec}} as V1Pod
    expect(staticPodReferences(pod)).toBe(message)
    const text = JSON.stringify({apiVersion: 'v1', kind: 'Pod', ...pod})
    expect(() => decodeStaticPod(text, '/m/f.json', 'n1')).toThrow(message)
  })

  test('emptyDir and hostPath volumes and plain env are fine', () => {
    const pod = {
      metadata: {name: 'x'},
      spec: {
        containers: [{name: 'a', image: 'b', env: [{name: 'X', value: '1'}]}],
        volumes: [
          {name: 'e', emptyDir: {}},
          {name: 'h', hostPath: {path: '/tmp'}},
        ],
      },
    } as V1Pod
    expect(staticPodReferences(pod)).toBeUndefined()
  })
})

describe('listing a manifest directory', () => {
  test('non-recursive, dotfiles skipped, sorted, YAML and JSON; bad files are reported and left out', async () => {
    const d = tmp()
    writeFileSync(join(d, 'b.yaml'), yaml('bee'))
    writeFileSync(join(d, 'a.json'), JSON.stringify({apiVersion: 'v1', kind: 'Pod', metadata: {name: 'ay'}, spec: {containers: [{name: 'c', image: 'i'}]}}))
    writeFileSync(join(d, '.hidden.yaml'), yaml('hidden'))
    writeFileSync(join(d, 'broken.yaml'), 'kind: [')
    mkdirSync(join(d, 'sub'))
    writeFileSync(join(d, 'sub', 'deep.yaml'), yaml('deep'))
    const l = await readManifestDir(d, 'n1')
    expect(l.missing).toBe(false)
    expect(l.pods.map((p) => p.metadata!.name)).toEqual(['ay-n1', 'bee-n1'])
    expect(l.problems).toEqual([{file: join(d, 'broken.yaml'), message: expect.stringMatching(/^cannot parse: /)}])
  })

  test('a file over 10 MiB is refused without being parsed', async () => {
    const d = tmp()
    writeFileSync(join(d, 'big.yaml'), `${yaml('big')}# ${'x'.repeat(MaxManifestBytes)}\n`)
    const l = await readManifestDir(d, 'n1')
    expect(l.pods).toEqual([])
    expect(l.problems[0].message).toBe('file is larger than the 10 MiB limit')
  })

  test('two files with the same pod name: the first wins, the second is reported', async () => {
    const d = tmp()
    writeFileSync(join(d, '1.yaml'), yaml('web'))
    writeFileSync(join(d, '2.yaml'), yaml('web', '  restartPolicy: Never\n'))
    const l = await readManifestDir(d, 'n1')
    expect(l.pods).toHaveLength(1)
    expect(l.pods[0].spec!.restartPolicy).toBe('Always')
    expect(l.problems).toEqual([{file: join(d, '2.yaml'), message: `duplicate pod name "default/web-n1" (already defined by ${join(d, '1.yaml')}), ignoring`}])
  })

  test('a missing directory is an empty, complete listing; a dangling symlink is skipped quietly', async () => {
    const d = tmp()
    expect(await readManifestDir(join(d, 'nope'), 'n1')).toEqual({pods: [], problems: [], missing: true})
    symlinkSync(join(d, 'gone.yaml'), join(d, 'link.yaml'))
    expect(await readManifestDir(d, 'n1')).toEqual({pods: [], problems: [], missing: false})
  })
})

describe('the file source', () => {
  const sources: FileSource[] = []
  afterEach(async () => {
    for (const s of sources.splice(0)) await s.stop()
  })

  function source(dir: string, checkIntervalMs = 60_000) {
    const sets: V1Pod[][] = []
    const problems: ManifestProblem[] = []
    const s = new FileSource({dir, nodeName: 'n1', checkIntervalMs, debounceMs: 20}, {onSet: (p) => sets.push(p), onProblem: (p) => problems.push(p)})
    sources.push(s)
    return {s, sets, problems}
  }
  const names = (pods: V1Pod[] | undefined) => (pods ?? []).map((p) => p.metadata!.name)

  test('an empty directory still sends a (empty) listing at start', async () => {
    const {s, sets} = source(tmp())
    await s.start()
    expect(sets).toEqual([[]])
  })

  test('changes are seen through the watch, without waiting for the periodic listing', async () => {
    const d = tmp()
    const {s, sets} = source(d)
    await s.start()
    writeFileSync(join(d, 'web.yaml'), yaml('web'))
    await until(() => names(sets.at(-1)).includes('web-n1'), 'the new file')
    rmSync(join(d, 'web.yaml'))
    await until(() => sets.at(-1)!.length === 0, 'the removal')
  })

  test('a directory made after start is found by the periodic listing and watched from then on', async () => {
    const d = join(tmp(), 'later')
    const {s, sets} = source(d, 100)
    await s.start()
    expect(sets).toEqual([[]])
    mkdirSync(d)
    writeFileSync(join(d, 'a.yaml'), yaml('a'))
    await until(() => names(sets.at(-1)).includes('a-n1'), 'the periodic listing')
    expect(s.handles).toBe(2) // interval + watcher
  })

  test('a problem is reported once per file and problem, again only when it changes', async () => {
    const d = tmp()
    // Written whole (as editors do), so the frequent listing never reads half a file.
    const write = (text: string) => {
      writeFileSync(join(d, '.bad.yaml.tmp'), text)
      renameSync(join(d, '.bad.yaml.tmp'), join(d, 'bad.yaml'))
    }
    write('kind: [')
    const {s, problems} = source(d, 30)
    await s.start()
    await new Promise((r) => setTimeout(r, 200))
    expect(problems).toHaveLength(1)
    write(yaml('bad', '  serviceAccountName: x\n'))
    await until(() => problems.length === 2, 'the new problem')
    expect(problems[1].message).toBe('spec.serviceAccountName: static pods may not reference serviceaccounts')
    // Fixed, then broken the same way again: reported again.
    write(yaml('bad'))
    await new Promise((r) => setTimeout(r, 150))
    write(yaml('bad', '  serviceAccountName: x\n'))
    await until(() => problems.length === 3, 'the problem after the fix')
  })

  test('stop closes the watcher and every timer; nothing is handed on after', async () => {
    const d = tmp()
    const {s, sets} = source(d, 20)
    await s.start()
    expect(s.handles).toBe(2)
    writeFileSync(join(d, 'a.yaml'), yaml('a'))
    await s.stop()
    expect(s.handles).toBe(0)
    const n = sets.length
    writeFileSync(join(d, 'b.yaml'), yaml('b'))
    await new Promise((r) => setTimeout(r, 150))
    expect(sets.length).toBe(n)
  })
})
