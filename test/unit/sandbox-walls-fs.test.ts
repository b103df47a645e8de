import {describe, expect, test} from '@jest/globals'
import {spawnSync} from 'node:child_process'
import {chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {bwrapArgs} from '../../src/emulator/runtime/sandbox/bwrap.js'
import {DefaultHiddenPaths, hiddenPaths, kubeconfigReferences} from '../../src/emulator/runtime/sandbox/hidden-paths.js'
import {
  hostMountsBelow,
  layerPrefix,
  LayerScripts,
  layerWrittenDirs,
  prepareRootLayer,
  removeRootLayer,
  retiredLayersRemoved,
  retiringLayers,
  topLevelDirs,
  topmostBelow,
} from '../../src/emulator/runtime/sandbox/root-layer.js'
import {parseMountinfo, readMountinfo, type MountEntry} from '../../src/emulator/runtime/sandbox/mountinfo.js'
import {forgetHostRoot, hostRootEntries, SettledMs} from '../../src/emulator/runtime/sandbox/host-root.js'
import {registeredStateDirs, registerStateDir, stateBase} from '../../src/common/state-dirs.js'
import {localStorageViolation} from '../../src/emulator/runtime/pod/eviction.js'

/** A mount table of these points alone, every filesystem writable. */
function writableMounts(...points: string[]): MountEntry[] {
  return points.map((point) => ({point, fsType: '', source: '', readOnlyFs: false}))
}

describe('the writable layer', () => {
  test('mountinfo mount points, octal escapes undone; a top-level directory with mounts below it is overlaid', () => {
    const info = [
      '22 1 254:0 / / rw - ext4 /dev/vda rw',
      '23 22 0:5 / /proc rw - proc proc rw',
      '24 22 0:6 / /mnt/a\\040b ro - tmpfs t ro',
      '25 24 0:8 / /mnt/a\\040b/inner ro - tmpfs t ro',
      '26 22 0:7 / /tmp rw - tmpfs t rw',
      '27 26 0:9 / /tmp/x rw - tmpfs t rw',
    ].join('\n')
    const points = parseMountinfo(info).map((m) => m.point)
    expect(points).toEqual(['/', '/proc', '/mnt/a b', '/mnt/a b/inner', '/tmp', '/tmp/x'])
    const dirs = topLevelDirs()
    expect(dirs.overlay).toEqual(expect.arrayContaining(['/mnt', '/tmp', '/usr']))
    expect(dirs.overlay).not.toContain('/proc')
  })

  test('hostMountsBelow: a read-only filesystem below an overlaid directory is bound back, a writable one is not shown (its unix sockets would reach the host), one a shown mount carries is masked; network namespace files never', () => {
    const info = [
      '22 1 254:0 / / rw - ext4 /dev/vda rw',
      '24 22 0:6 / /mnt/a\\040b ro - squashfs s ro',
      '25 24 0:8 / /mnt/a\\040b/inner rw - tmpfs t rw',
      '26 25 0:10 / /mnt/a\\040b/inner/deeper ro - squashfs s ro',
      '27 22 0:7 / /run/user/1000 rw - tmpfs t rw',
      '28 27 0:11 / /run/user/1000/doc ro - fuse f ro',
      '29 22 254:0 /run/netns /run/netns rw,nosuid - ext4 /dev/vda rw,discard',
      '30 29 0:4 net:[4026532] /run/netns/p rw - nsfs nsfs rw',
      // Read-only as a mount, but its filesystem is writable (mounted writable elsewhere): its sockets live.
      '31 22 0:12 / /srv/data ro - ext4 /dev/vdb rw',
    ].join('\n')
    const table = parseMountinfo(info)
    expect(table[1]).toMatchObject({point: '/mnt/a b', readOnlyFs: true})
    expect(table[6]).toMatchObject({point: '/run/netns', readOnlyFs: false})
    expect(table[8]).toMatchObject({point: '/srv/data', readOnlyFs: false})
    expect(hostMountsBelow(['/mnt', '/run', '/srv'], table)).toEqual({rebound: ['/mnt/a b'], masked: ['/mnt/a b/inner']})
    // Bound read-only whole (the unprivileged mode's directories with mounts below), /run carries its mounts: the writable ones are masked.
    expect(hostMountsBelow(['/mnt'], table, ['/run'])).toEqual({rebound: ['/mnt/a b'], masked: ['/mnt/a b/inner', '/run/netns', '/run/user/1000']})
  })

  test('topmostBelow: the topmost mount points strictly below the directories; a sibling sharing a prefix is not below', () => {
    const points = ['/run', '/run/netns', '/run/netns/a', '/run/netns/b', '/runner/x', '/var/lib/x', '/var/lib/x/y', '/var/lib-2/z', '/srv']
    expect(topmostBelow(['/run', '/var'], points)).toEqual(['/run/netns', '/var/lib-2/z', '/var/lib/x'])
    expect(topmostBelow(['/srv'], points)).toEqual([])
    expect(topmostBelow(['/'], ['/', '/a', '/a/b', '/c'])).toEqual(['/a', '/c'])
  })

  test('an fstab of one overlay per directory, uppers with the lower mode; the prefix mounts it in a namespace of its own, then runs bwrap', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'layer-')), 'main')
    try {
      // This host's own mounts below /tmp (another test's) would keep /tmp out of a user namespace's overlays: the table is given.
      const layer = await prepareRootLayer(dir, 'user-namespace', ['/tmp', '/usr'], writableMounts('/', '/proc'))
      const fstab = readFileSync(layer.fstab!, 'utf8')
      expect(fstab).toContain(`overlay ${dir}/merged/tmp overlay lowerdir=/tmp,upperdir=${dir}/upper/tmp,workdir=${dir}/work/tmp,userxattr 0 0`)
      expect(statSync(join(dir, 'upper', 'tmp')).mode & 0o7777).toBe(statSync('/tmp').mode & 0o7777)
      expect(layer.overlays).toEqual([
        {path: '/tmp', merged: join(dir, 'merged', 'tmp'), upper: join(dir, 'upper', 'tmp')},
        {path: '/usr', merged: join(dir, 'merged', 'usr'), upper: join(dir, 'upper', 'usr')},
      ])
      const prefix = layerPrefix(layer)
      // mount(8) by its absolute path, as an argument of the fixed script: never looked up on the container's PATH.
      expect(prefix).toEqual(expect.arrayContaining(['--user', '--keep-caps', '--mount', LayerScripts.all, expect.stringMatching(/^\/.*\/mount$/), layer.fstab, '--ambient-caps=-all']))
      expect(layerPrefix({...layer, mode: 'root'})).not.toContain('--user')
      // A new instance starts from an empty layer.
      writeFileSync(join(dir, 'upper', 'tmp', 'old'), 'x')
      await prepareRootLayer(dir, 'root', ['/usr'])
      expect(() => statSync(join(dir, 'upper', 'tmp'))).toThrow()
      await expect(prepareRootLayer('/tmp/a,b', 'root', ['/usr'])).rejects.toThrow(/overlay mount option/)
    } finally {
      removeRootLayer(dir)
      // The temporary parent too (and what a second instance retired into it).
      await retiredLayersRemoved()
      rmSync(dirname(dir), {recursive: true, force: true})
    }
  })

  test('as root, one overlay of / covers the directories on the root filesystem; a top-level mount of its own gets its own overlay', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'layer-')), 'main')
    try {
      const layer = await prepareRootLayer(dir, 'root', ['/tmp', '/usr'], writableMounts('/', '/proc', '/tmp'))
      const lines = readFileSync(layer.fstab!, 'utf8').trim().split('\n')
      expect(lines).toEqual([
        `overlay ${dir}/merged overlay lowerdir=/,upperdir=${dir}/upper,workdir=${dir}/work 0 0`,
        `overlay ${dir}/mounts/tmp/merged overlay lowerdir=/tmp,upperdir=${dir}/mounts/tmp/upper,workdir=${dir}/mounts/tmp/work 0 0`,
      ])
      expect(statSync(join(dir, 'upper')).mode & 0o7777).toBe(statSync('/').mode & 0o7777)
      expect(statSync(join(dir, 'mounts', 'tmp', 'upper')).mode & 0o7777).toBe(statSync('/tmp').mode & 0o7777)
      expect(layer.overlays).toEqual([
        {path: '/usr', merged: join(dir, 'merged', 'usr'), upper: join(dir, 'upper', 'usr')},
        {path: '/tmp', merged: join(dir, 'mounts', 'tmp', 'merged'), upper: join(dir, 'mounts', 'tmp', 'upper')},
      ])
      // The overlay of / is the view's root; /tmp, a mount of its own, is bound over it.
      expect(layer.root).toBe(join(dir, 'merged'))
      expect(layer.topMounts).toEqual(['/tmp'])
      // What the instance writes in either counts toward its ephemeral storage.
      writeFileSync(join(dir, 'mounts', 'tmp', 'upper', 'f'), 'x')
      expect(layerWrittenDirs(dir)).toEqual([join(dir, 'upper'), join(dir, 'mounts')])
      mkdirSync(join(dir, 'mounts', 'tmp', 'work', 'work'), {mode: 0})
      removeRootLayer(dir)
      expect(() => statSync(dir)).toThrow()
    } finally {
      removeRootLayer(dir)
      // The temporary parent too (and what a second instance retired into it).
      await retiredLayersRemoved()
      rmSync(dirname(dir), {recursive: true, force: true})
    }
  })

  test('one overlay (as root, the usual case) is mounted directly, without an fstab; several by one mount -a', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'layer-')), 'main')
    try {
      const layer = await prepareRootLayer(dir, 'root', ['/usr', '/opt'], writableMounts('/', '/proc'))
      expect(layer.fstab).toBeUndefined()
      expect(existsSync(join(dir, 'fstab'))).toBe(false)
      expect(layer.mounts).toEqual([{options: `lowerdir=/,upperdir=${dir}/upper,workdir=${dir}/work`, target: `${dir}/merged`}])
      const prefix = layerPrefix(layer)
      const script = prefix.indexOf(LayerScripts.one)
      expect(script).toBeGreaterThan(0)
      expect(prefix.slice(script + 1)).toEqual(['vnode-layer', expect.stringMatching(/^\/.*\/mount$/), layer.mounts[0]!.options, layer.mounts[0]!.target])
      if (process.getuid?.() === 0) {
        // The prefix really mounts it, in a mount namespace of its own: the command sees the host's /usr through the overlay.
        const r = spawnSync(prefix[0]!, [...prefix.slice(1), '/bin/ls', join(dir, 'merged', 'usr')], {encoding: 'utf8'})
        expect(r.status).toBe(0)
        expect(r.stdout.split('\n')).toContain('bin')
        expect(parseMountinfo(readMountinfo()).map((m) => m.point)).not.toContain(join(dir, 'merged'))
      }
    } finally {
      removeRootLayer(dir)
      // The temporary parent too (and what a second instance retired into it).
      await retiredLayersRemoved()
      rmSync(dirname(dir), {recursive: true, force: true})
    }
  })

  test('the listing of / is kept while / is unchanged and settled, read again otherwise', () => {
    forgetHostRoot()
    const changed = Number(statSync('/', {bigint: true}).mtimeNs / 1_000_000n)
    // Just changed: a second change in the same tick would keep the mtime, so nothing is kept.
    expect(hostRootEntries(changed)).not.toBe(hostRootEntries(changed))
    const later = Math.max(changed, Number(statSync('/', {bigint: true}).ctimeNs / 1_000_000n)) + SettledMs + 1
    const first = hostRootEntries(later)
    expect(hostRootEntries(later)).toBe(first)
    expect(first.map((e) => e.name).sort()).toEqual(readdirSync('/').sort())
    expect(first.find((e) => e.name === 'usr')).toMatchObject({path: '/usr', kind: 'dir'})
    forgetHostRoot()
  })

  test("a new instance's layer is made at once; the earlier one is moved aside and removed in the background, as is one an earlier process left", async () => {
    await retiredLayersRemoved()
    const parent = mkdtempSync(join(tmpdir(), 'layer-'))
    const dir = join(parent, 'main')
    try {
      await prepareRootLayer(dir, 'root', ['/usr'], writableMounts('/'))
      writeFileSync(join(dir, 'upper', 'written'), 'x')
      mkdirSync(join(dir, 'work', 'work'), {recursive: true, mode: 0})
      // What a vnode process that stopped mid-removal left, and an unrelated sibling.
      mkdirSync(join(parent, 'main.retired-0000/upper'), {recursive: true})
      mkdirSync(join(parent, 'sidecar'))
      await prepareRootLayer(dir, 'root', ['/usr'], writableMounts('/'))
      expect(() => statSync(join(dir, 'upper', 'written'))).toThrow()
      expect(retiringLayers()).toBe(2)
      await retiredLayersRemoved()
      expect(retiringLayers()).toBe(0)
      expect(readdirSync(parent).sort()).toEqual(['main', 'sidecar'])
    } finally {
      rmSync(parent, {recursive: true, force: true})
    }
  })

  test('bwrap binds overlaid directories from their overlay, the rest read-only; no shadow where the overlay takes the mount point, made in its upper directory', () => {
    const upper = mkdtempSync(join(tmpdir(), 'upper-opt-'))
    const layer = {dir: '/l', mounts: [], mode: 'root' as const, overlays: [{path: '/opt', merged: '/l/merged/opt', upper}], subMounts: [], maskedMounts: [], topMounts: []}
    const args = bwrapArgs({hostname: 'h', binds: [{source: '/srv/v', target: '/opt/vnode-missing/x', readOnly: false}], hide: [], rootLayer: layer}, {cwd: '/', block: false})
    expect(statSync(join(upper, 'vnode-missing', 'x')).isDirectory()).toBe(true)
    rmSync(upper, {recursive: true, force: true})
    const idx = args.findIndex((a, i) => a === '--bind' && args[i + 1] === '/l/merged/opt' && args[i + 2] === '/opt')
    expect(idx).toBeGreaterThanOrEqual(0)
    expect(args.join(' ')).toContain('--ro-bind /usr /usr')
    expect(args).not.toContain('--tmpfs /opt')
    const plain = bwrapArgs({hostname: 'h', binds: [], hide: []}, {cwd: '/', block: false})
    // Without a layer nothing of the host is writable.
    expect(plain.filter((a, i) => a === '--bind' && plain[i + 1] !== undefined)).toEqual([])
  })

  test('as root, the overlay of / is bound as the root in one bind; over it only the top-level host mounts: their own overlay, or read-only', () => {
    const layer = {
      dir: '/l',
      mounts: [],
      mode: 'root' as const,
      root: '/l/merged',
      overlays: [
        {path: '/usr', merged: '/l/merged/usr', upper: '/l/upper/usr'},
        {path: '/opt', merged: '/l/mounts/opt/merged', upper: '/l/mounts/opt/upper'},
      ],
      subMounts: [],
      maskedMounts: [],
      topMounts: ['/opt', '/usr'],
    }
    const args = bwrapArgs({hostname: 'h', binds: [], hide: [], rootLayer: layer}, {cwd: '/', block: false})
    expect(args.slice(0, 3)).toEqual(['--bind', '/l/merged', '/'])
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((x, j) => args[i + j] === x))
    expect(at('--bind', '/l/mounts/opt/merged', '/opt')).toBeGreaterThan(0)
    // /usr is in the overlay of / (a top mount listed or not): not bound again; nothing of / is bound read-only but the mounts listed.
    expect(at('--bind', '/l/merged/usr', '/usr')).toBe(-1)
    expect(at('--ro-bind', '/usr', '/usr')).toBe(-1)
    expect(args.filter((a, i) => a === '--ro-bind' && args[i + 1] === args[i + 2] && args[i + 1] !== '/sys')).toEqual([])
    expect(args).not.toContain('--symlink')
    // A top-level host mount with no overlay of its own (as /etc would be) is bound read-only over the overlay.
    const withMount = bwrapArgs({hostname: 'h', binds: [], hide: [], rootLayer: {...layer, topMounts: [...layer.topMounts, '/etc']}}, {cwd: '/', block: false})
    expect(withMount.findIndex((_, i) => withMount[i] === '--ro-bind' && withMount[i + 1] === '/etc' && withMount[i + 2] === '/etc')).toBeGreaterThan(0)
  })

  test('a mount point the host lacks, or reaches through a link into a hidden path, is made in the upper directory of the overlay that shows it before it is mounted: its host directories as they are, then a directory, or an empty file for a file bound there; nothing for what the host has', () => {
    const dir = mkdtempSync(join(tmpdir(), 'layer-pin-'))
    try {
      const rootUpper = join(dir, 'upper')
      const tmpUpper = join(dir, 'upper-tmp')
      mkdirSync(rootUpper)
      mkdirSync(tmpUpper)
      const sourceDir = join(dir, 'vol')
      mkdirSync(sourceDir)
      const sourceFile = join(dir, 'file')
      writeFileSync(sourceFile, 'x')
      // On the host, in /tmp (overlaid here): a directory of its own mode, a link in it into a hidden directory.
      const hostDir = join(dir, 'host')
      mkdirSync(hostDir)
      chmodSync(hostDir, 0o1750)
      const hidden = join(dir, 'hidden')
      mkdirSync(join(hidden, 'inner'), {recursive: true})
      symlinkSync(join(hidden, 'inner'), join(hostDir, 'link'))
      mkdirSync(join(hostDir, 'there'))
      const missing = `vnode-unit-pin-${process.pid}`
      const layer = {
        dir,
        mounts: [],
        mode: 'root' as const,
        root: join(dir, 'merged'),
        rootUpper,
        overlays: [{path: '/tmp', merged: join(dir, 'merged', 'tmp'), upper: join(rootUpper, 'tmp')}],
        subMounts: [],
        maskedMounts: [],
        topMounts: [],
      }
      const binds = [
        {source: sourceDir, target: `/${missing}/deep/er`, readOnly: false},
        {source: sourceFile, target: `/${missing}-file`, readOnly: false},
        {source: sourceDir, target: join(hostDir, 'link', 'y'), readOnly: false},
        {source: sourceFile, target: join(hostDir, 'new-file'), readOnly: false},
        {source: sourceDir, target: join(hostDir, 'there'), readOnly: false},
      ]
      const spec = {hostname: 'h', binds, hide: [hidden], rootLayer: layer}
      const args = bwrapArgs(spec, {cwd: '/', block: false})
      expect(args.slice(0, 3)).toEqual(['--bind', join(dir, 'merged'), '/'])
      // The link into the hidden path is not followed: the bind is at the target itself, made over the link.
      expect(args.join(' ')).toContain(`--bind ${sourceDir} ${join(hostDir, 'link', 'y')}`)
      const kind = (p: string) => {
        const st = lstatSync(p)
        return `${st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other'} ${(st.mode & 0o7777).toString(8)}`
      }
      expect(readdirSync(rootUpper).sort()).toEqual(['tmp', missing, `${missing}-file`].sort())
      expect([join(rootUpper, missing), join(rootUpper, missing, 'deep'), join(rootUpper, missing, 'deep', 'er'), join(rootUpper, `${missing}-file`)].map(kind)).toEqual([
        'dir 755',
        'dir 755',
        'dir 755',
        'file 644',
      ])
      // In /tmp (a directory of the overlay of /): the host's directories on the way as they are (mode, owner), from /tmp
      // down, the rest made; nothing for what the host has.
      const inTmp = (...p: string[]) => join(rootUpper, hostDir.slice(1), ...p)
      expect(kind(join(rootUpper, 'tmp'))).toBe(`dir ${(statSync('/tmp').mode & 0o7777).toString(8)}`)
      expect([inTmp(), inTmp('link'), inTmp('link', 'y'), inTmp('new-file')].map(kind)).toEqual(['dir 1750', 'dir 755', 'dir 755', 'file 644'])
      expect(lstatSync(inTmp()).uid).toBe(lstatSync(hostDir).uid)
      expect(readdirSync(inTmp()).sort()).toEqual(['link', 'new-file'])
      // /tmp as a mount of its own (its own overlay): its upper directory is that overlay's, made with it.
      const ownLayer = {...layer, overlays: [{path: '/tmp', merged: join(dir, 'mounts', 'tmp', 'merged'), upper: tmpUpper}]}
      bwrapArgs({...spec, rootLayer: ownLayer}, {cwd: '/', block: false})
      expect(kind(join(tmpUpper, hostDir.slice('/tmp/'.length), 'link', 'y'))).toBe('dir 755')
      // Made once: a second start of the same layer finds them there.
      expect(() => bwrapArgs(spec, {cwd: '/', block: false})).not.toThrow()
      // On bwrap's tmpfs root (no overlay of / as the view's root) the top level is not made: the view's top level is fixed at the start.
      rmSync(rootUpper, {recursive: true})
      mkdirSync(rootUpper)
      bwrapArgs({...spec, binds: binds.slice(0, 2), rootLayer: {...layer, root: undefined, rootUpper: undefined, overlays: []}}, {cwd: '/', block: false})
      expect(readdirSync(rootUpper)).toEqual([])
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test("a host mount below an overlaid directory is bound back read-only over the overlay (not when hidden); a mount point in it is made on a shadow, not in the host's mount", () => {
    const root = mkdtempSync(join(tmpdir(), 'submount-'))
    try {
      const sub = join(root, 'disk')
      const secret = join(root, 'state')
      mkdirSync(sub)
      mkdirSync(join(secret, 'mnt'), {recursive: true})
      const layer = {
        dir: '/l',
        mounts: [],
        mode: 'root' as const,
        overlays: [{path: '/tmp', merged: '/l/merged/tmp', upper: '/l/upper/tmp'}],
        subMounts: [sub, join(secret, 'mnt')],
        maskedMounts: [],
        topMounts: [],
      }
      const args = bwrapArgs({hostname: 'h', binds: [{source: '/srv/v', target: join(sub, 'missing', 'x'), readOnly: false}], hide: [secret], rootLayer: layer}, {cwd: '/', block: false})
      const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((x, j) => args[i + j] === x))
      expect(at('--bind', '/l/merged/tmp', '/tmp')).toBeGreaterThanOrEqual(0)
      expect(at('--ro-bind-try', sub, sub)).toBeGreaterThan(at('--bind', '/l/merged/tmp', '/tmp'))
      expect(at('--ro-bind-try', join(secret, 'mnt'), join(secret, 'mnt'))).toBe(-1)
      expect(at('--tmpfs', secret)).toBeGreaterThan(0)
      // The missing mount point would be made inside the read-only host mount: a shadow of it takes it.
      expect(at('--tmpfs', sub)).toBeGreaterThan(at('--ro-bind-try', sub, sub))
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test("a container's layer counts toward its ephemeral-storage limit and the pod's", () => {
    const pod = {metadata: {name: 'p'}, spec: {containers: [{name: 'main', resources: {limits: {'ephemeral-storage': '1Mi'}}}]}}
    const usage = (layer: number) => ({emptyDirs: new Map(), memoryEmptyDirs: new Map(), logs: new Map([['main', 1000]]), layers: new Map([['main', layer]])})
    expect(localStorageViolation(pod, usage(1000))).toBeUndefined()
    expect(localStorageViolation(pod, usage(2 * 1024 * 1024))).toBe('Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ')
  })
})

describe('hidden paths', () => {
  test('state dirs always, kubeconfigs and their files, the dir of a control plane, the defaults, --hide; --expose; PATH dirs stay visible', () => {
    const root = mkdtempSync(join(tmpdir(), 'hide-'))
    try {
      const env = {HOME: join(root, 'home'), XDG_STATE_HOME: join(root, 'state')}
      const cluster = join(root, 'cluster')
      mkdirSync(join(cluster, 'pki'), {recursive: true})
      writeFileSync(join(cluster, 'pki', 'ca.key'), 'k')
      writeFileSync(join(cluster, 'kubeconfig'), 'x')
      const kc = join(root, 'kc')
      writeFileSync(
        kc,
        ['users:', '- name: u', '  user:', '    client-key: keys/u.key', '    client-certificate: "/abs/u.crt"', 'clusters:', '- cluster:', '    certificate-authority: ca.crt'].join('\n'),
      )
      expect(kubeconfigReferences(kc)).toEqual([join(root, 'keys/u.key'), '/abs/u.crt', join(root, 'ca.crt')])
      registerStateDir(join(root, 'node-b'), env)
      expect(registeredStateDirs(env)).toEqual([join(root, 'node-b')])
      const hidden = hiddenPaths({
        stateDir: join(root, 'node-a'),
        kubeconfigs: [kc, join(cluster, 'kubeconfig')],
        hide: ['/srv/secret'],
        expose: ['~/.docker'],
        path: `${env.HOME}/.aws/bin:/usr/bin`,
        env,
      })
      expect(hidden).toEqual(
        expect.arrayContaining([stateBase(env), join(root, 'node-b'), join(root, 'node-a'), kc, join(root, 'keys/u.key'), cluster, '/srv/secret', `${env.HOME}/.ssh`, '/etc/shadow']),
      )
      expect(hidden).not.toContain(`${env.HOME}/.docker`)
      expect(hidden).not.toContain(`${env.HOME}/.aws`)
      // Inside the hidden cluster dir: not masked again.
      expect(hidden).not.toContain(join(cluster, 'kubeconfig'))
      expect(DefaultHiddenPaths).toEqual(
        expect.arrayContaining(['~/.kube', '~/.ssh', '~/.aws', '~/.config/gcloud', '~/.azure', '~/.docker', '~/.gnupg', '~/.netrc', '/etc/shadow', '/etc/gshadow', '/etc/kubernetes']),
      )
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })
})
