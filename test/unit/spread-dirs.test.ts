import {describe, expect, test} from '@jest/globals'
import {mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import {join} from 'node:path'
import {spreadSubdirectories} from '../../src/common/spread-dirs.js'
import {onExt4, topFlag} from '../support/fs-flags.js'
import {tempDir} from './temp-dirs.js'

describe("a state dir's trees, each in a block group of its own (ext4's Orlov allocator)", () => {
  test('the flag on each dir where its filesystem is ext2/3/4, not on what is made inside; false and nothing set elsewhere', async () => {
    const base = tempDir('spread-')
    const dirs = [join(base, 'pods'), join(base, 'logs')]
    for (const d of dirs) mkdirSync(d)
    const ext = onExt4(base)
    expect(await spreadSubdirectories(dirs)).toBe(ext)
    for (const d of dirs) expect(topFlag(d)).toBe(ext)
    const pod = join(dirs[0]!, 'a-pod')
    mkdirSync(pod)
    // Not inherited: a pod's own subdirectories stay near it.
    if (ext) expect(topFlag(pod)).toBe(false)
  })

  test('a filesystem without the flag (tmpfs) or a missing dir: false, no error', async () => {
    expect(await spreadSubdirectories(['/nonexistent-vnode-spread-test'])).toBe(false)
    const shm = mkdtempSync('/dev/shm/vnode-spread-')
    try {
      expect(onExt4(shm)).toBe(false)
      expect(await spreadSubdirectories([shm])).toBe(false)
    } finally {
      rmSync(shm, {recursive: true, force: true})
    }
  })
})
