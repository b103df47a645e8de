import {describe, expect, test} from '@jest/globals'
import {bwrapArgs} from '../../src/emulator/runtime/sandbox/bwrap.js'
import {hiddenLayerEntries, hiddenLayerScript, type LookHost} from '../../src/emulator/runtime/sandbox/hidden-layer.js'
import {startFrom} from '../../src/emulator/runtime/sandbox/mount-base.js'
import type {MountEntry} from '../../src/emulator/runtime/sandbox/mountinfo.js'
import type {RootLayer} from '../../src/emulator/runtime/sandbox/root-layer.js'
import type {ContainerSandboxSpec} from '../../src/emulator/runtime/sandbox/spec.js'

/** A host of these entries alone (directories resolve to themselves unless a link is given). */
function host(entries: Record<string, 'dir' | 'file' | 'symlink' | {dir: string}>): LookHost {
  return (p) => {
    const e = entries[p]
    if (e === undefined) return undefined
    if (typeof e === 'object') return {kind: 'dir', real: e.dir}
    return e === 'dir' ? {kind: 'dir', real: p} : {kind: e}
  }
}

function mounts(...points: string[]): MountEntry[] {
  return points.map((point) => ({point, fsType: 'ext4', source: '', readOnlyFs: false}))
}

const rootLayer: RootLayer = {
  dir: '/s/l',
  overlays: [{path: '/etc', merged: '/s/l/merged/etc', upper: '/s/l/upper/etc'}],
  subMounts: [],
  maskedMounts: [],
  mounts: [{options: 'lowerdir=/,upperdir=/s/l/upper,workdir=/s/l/work', target: '/s/l/merged'}],
  mode: 'root',
  root: '/s/l/merged',
  topMounts: [],
}

describe('the layer of hidden paths', () => {
  test('holds the directories and files on the root filesystem; not a path under another mount, a link, a missing path, one inside another, or one under a linked directory', () => {
    const look = host({
      '/root': 'dir',
      '/root/.kube': 'dir',
      '/root/.kube/config': 'file',
      '/etc': 'dir',
      '/etc/shadow': 'file',
      '/home': 'dir',
      '/home/u/.ssh': 'dir',
      '/root/.aws': 'symlink',
      '/var': 'dir',
      '/var/run': {dir: '/run'},
      '/var/run/secret': 'file',
      '/proc': 'dir',
      '/proc/kcore': 'file',
    })
    const paths = ['/root/.kube/config', '/root/.kube', '/etc/shadow', '/home/u/.ssh', '/root/.aws', '/root/.netrc', '/var/run/secret', '/proc/kcore', '/']
    expect(hiddenLayerEntries(paths, mounts('/', '/home', '/proc'), look)).toEqual([
      {kind: 'dir', path: '/root/.kube'},
      {kind: 'file', path: '/etc/shadow'},
    ])
    // A mount below a hidden directory does not keep it out (the overlay does not show that mount either).
    expect(hiddenLayerEntries(['/root/.kube'], mounts('/', '/root/.kube/mnt'), look)).toEqual([{kind: 'dir', path: '/root/.kube'}])
    // The hidden path a mount point of its own: not on the root filesystem.
    expect(hiddenLayerEntries(['/root/.kube'], mounts('/', '/root/.kube'), look)).toEqual([])
  })

  test('the build script gets the namespace, the directory and each entry as arguments, never in its source', () => {
    const script = hiddenLayerScript(
      '/proc/7/ns/mnt',
      '/s/hidden-layer',
      [
        {kind: 'dir', path: '/root/.kube'},
        {kind: 'file', path: '/etc/sha dow'},
      ],
      'x64',
    )!
    expect(script.args).toEqual(['308', '165', '188', '/proc/7/ns/mnt', '/s/hidden-layer', 'dir', '/root/.kube', 'file', '/etc/sha dow'])
    expect(script.source).not.toContain('/root/.kube')
    expect(hiddenLayerScript('/proc/7/ns/mnt', '/s/h', [], 'ia32')).toBeUndefined()
  })

  test('a start from a base with a layer mounts it over `/` and masks none of what it covers; without one, or with several overlays, nothing changes but the namespace', () => {
    const view: ContainerSandboxSpec = {hostname: 'h', binds: [], hide: ['/root/.kube', '/etc/shadow'], rootLayer}
    const base = {path: '/proc/9/ns/mnt', hiddenLayer: {lower: '/s/hidden-layer', covers: ['/root/.kube', '/etc/shadow']}}
    const from = startFrom(view, base)
    expect(from.mountBase).toBe('/proc/9/ns/mnt')
    expect(from.rootLayer!.mounts).toEqual([{options: 'lowerdir=/s/hidden-layer:/,upperdir=/s/l/upper,workdir=/s/l/work', target: '/s/l/merged'}])
    expect(from.layerHides).toEqual(['/root/.kube', '/etc/shadow'])
    expect(view.rootLayer!.mounts[0]!.options).toBe('lowerdir=/,upperdir=/s/l/upper,workdir=/s/l/work')
    expect(startFrom(view, {path: '/proc/9/ns/mnt'})).toEqual({...view, mountBase: '/proc/9/ns/mnt'})
    const several = {...rootLayer, mounts: [...rootLayer.mounts, {options: 'lowerdir=/opt,upperdir=/u,workdir=/w', target: '/m'}], fstab: '/s/l/fstab'}
    expect(startFrom({...view, rootLayer: several}, base)).toEqual({...view, rootLayer: several, mountBase: '/proc/9/ns/mnt'})
    expect(startFrom(view, undefined)).toBe(view)
  })

  test('bwrap masks only what the layer does not cover, nor anything inside what it covers; /sys is bound after every other bind, and a mask below it after it', () => {
    const args = bwrapArgs(
      {
        hostname: 'h',
        binds: [{source: '/srv/v', target: '/srv/data', readOnly: false}],
        hide: ['/etc/shadow', '/etc/ssh', '/etc/ssh/sshd_config', '/sys/kernel'],
        layerHides: ['/etc/shadow', '/etc/ssh'],
        rootLayer,
      },
      {cwd: '/', block: false},
    )
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((x, j) => args[i + j] === x))
    expect(at('--ro-bind', '/dev/null', '/etc/shadow')).toBe(-1)
    expect(args.filter((a) => a.startsWith('/etc/s'))).toEqual([])
    const sys = at('--ro-bind', '/sys', '/sys')
    expect(sys).toBeGreaterThan(at('--bind', '/srv/v', '/srv/data'))
    expect(at('--tmpfs', '/sys/kernel')).toBeGreaterThan(sys)
    expect(args.lastIndexOf('--bind')).toBeLessThan(sys)
  })
})
