import {describe, expect, test} from '@jest/globals'
import {bindsLackedDir, mountsSignature, nsfsDirs} from '../../src/emulator/runtime/sandbox/mount-base.js'
import {DefaultMountTableReuseMs, parseMountinfo, recentMountTable} from '../../src/emulator/runtime/sandbox/mountinfo.js'

describe('the mount base sandboxes start from', () => {
  const info = [
    '22 1 254:0 / / rw - ext4 /dev/vda rw',
    '30 22 254:0 /run/netns /run/netns rw shared:5 - ext4 /dev/vda rw',
    '31 30 0:4 net:[4026532300] /run/netns/vnode-pool-a rw shared:6 - nsfs nsfs rw',
    '32 30 0:4 net:[4026532301] /run/netns/vnode-pool-b rw shared:6 - nsfs nsfs rw',
    '40 22 0:4 net:[4026532400] /run/docker/netns/c\\0401 rw - nsfs nsfs rw',
    '41 22 0:26 / /tmp rw - tmpfs tmpfs rw',
  ].join('\n')

  test('lacks the netns dir and every directory that holds a network namespace file, and nothing else', () => {
    expect(nsfsDirs(info, '/run/netns').sort()).toEqual(['/run/docker/netns', '/run/netns'])
    expect(nsfsDirs('', '/run/netns')).toEqual(['/run/netns'])
  })

  test("a bind that shows one of them, whole or in part (a hostPath of /run/netns, /run or /), takes the host's namespace; others the base", () => {
    const lacked = ['/run/netns', '/run/docker/netns']
    for (const source of ['/run/netns', '/run/netns/vnode-pool-a', '/run', '/', '/run/docker']) expect(bindsLackedDir([{source}], lacked)).toBe(true)
    for (const source of ['/tmp/state/pods/u/volumes/v', '/run/user', '/var/run-netns', '/srv/data']) expect(bindsLackedDir([{source}], lacked)).toBe(false)
    expect(bindsLackedDir([], lacked)).toBe(false)
  })

  test("the host's mounts it copied: network namespace files come and go without making it stale; any other mount does", () => {
    const base = mountsSignature(info)
    const lines = info.split('\n')
    // Another pod's namespace, or one gone, and the same mounts listed in another order: the same.
    expect(mountsSignature([...lines, '33 30 0:4 net:[4026532302] /run/netns/vnode-pool-c rw shared:6 - nsfs nsfs rw'].join('\n'))).toBe(base)
    expect(mountsSignature(lines.filter((l) => !l.includes('vnode-pool-a')).join('\n'))).toBe(base)
    expect(mountsSignature([...lines].reverse().join('\n'))).toBe(base)
    // A disk mounted, a tmpfs gone, a mount point made a mount (the first `ip netns add`): stale.
    expect(mountsSignature([...lines, '50 22 8:1 / /mnt/disk rw - ext4 /dev/sdb1 rw'].join('\n'))).not.toBe(base)
    expect(mountsSignature(lines.filter((l) => !l.includes(' /tmp ')).join('\n'))).not.toBe(base)
    expect(mountsSignature(lines.filter((l) => !l.startsWith('30 ')).join('\n'))).not.toBe(base)
    expect(mountsSignature(lines.join('\n'))).toContain('/tmp tmpfs tmpfs')
  })

  test('one read of the mount table serves the starts of the next 50 ms, parsed once; an older one, or one from a clock that went back, is read again', () => {
    const t = 1_000_000
    const first = recentMountTable(t)
    expect(first.entries).toEqual(parseMountinfo(first.text))
    expect(first.entries.map((m) => m.point)).toContain('/')
    expect(recentMountTable(t + DefaultMountTableReuseMs - 1)).toBe(first)
    const later = recentMountTable(t + DefaultMountTableReuseMs)
    expect(later).not.toBe(first)
    expect(recentMountTable(t)).not.toBe(later)
  })
})
