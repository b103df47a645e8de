import {describe, expect, test} from '@jest/globals'
import {tempDir} from './temp-dirs.js'
import {existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {payloadPathError, writeAtomic} from '../../src/emulator/runtime/volumes/atomic-writer.js'
import {pinSubPath} from '../../src/emulator/runtime/volumes/subpath-pin.js'

const fresh = () => tempDir('atomic-')
const tsDirs = (dir: string) => readdirSync(dir).filter((e) => e.startsWith('..') && e !== '..data')

describe('the AtomicWriter layout', () => {
  test('files in a timestamped directory, ..data linking to it, top-level names linking through ..data; read-only directories', async () => {
    const dir = join(fresh(), 'vol')
    expect(
      await writeAtomic(
        dir,
        [
          {path: 'a', content: '1', mode: 0o644},
          {path: 'conf/b', content: '2', mode: 0o640},
        ],
        {private: false},
      ),
    ).toBe(true)
    expect(readlinkSync(join(dir, 'a'))).toBe('..data/a')
    expect(readlinkSync(join(dir, 'conf'))).toBe('..data/conf')
    expect(readlinkSync(join(dir, '..data'))).toMatch(/^\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\./)
    expect(readFileSync(join(dir, 'conf', 'b'), 'utf8')).toBe('2')
    expect(statSync(join(dir, 'conf', 'b')).mode & 0o777).toBe(0o640)
    expect(statSync(dir).mode & 0o777).toBe(0o555)
    expect(statSync(join(dir, 'conf')).mode & 0o777).toBe(0o555)
  })

  test('the same payload writes nothing; a change swaps ..data and removes the old version; a key gone loses its link', async () => {
    const dir = join(fresh(), 'vol')
    await writeAtomic(
      dir,
      [
        {path: 'a', content: '1', mode: 0o644},
        {path: 'b', content: 'x', mode: 0o644},
      ],
      {private: false},
    )
    const first = readlinkSync(join(dir, '..data'))
    expect(
      await writeAtomic(
        dir,
        [
          {path: 'a', content: '1', mode: 0o644},
          {path: 'b', content: 'x', mode: 0o644},
        ],
        {private: false},
      ),
    ).toBe(false)
    expect(readlinkSync(join(dir, '..data'))).toBe(first)
    expect(await writeAtomic(dir, [{path: 'a', content: '2', mode: 0o644}], {private: false})).toBe(true)
    expect(readlinkSync(join(dir, '..data'))).not.toBe(first)
    expect(readFileSync(join(dir, 'a'), 'utf8')).toBe('2')
    expect(existsSync(join(dir, 'b'))).toBe(false)
    expect(() => lstatSync(join(dir, 'b'))).toThrow()
    expect(tsDirs(dir)).toHaveLength(1)
  })

  test('private volumes: owner-only directories', async () => {
    const dir = join(fresh(), 'vol')
    await writeAtomic(dir, [{path: 'k', content: 's', mode: 0o600}], {private: true})
    expect(statSync(dir).mode & 0o777).toBe(0o500)
    expect(statSync(join(dir, '..data')).mode & 0o777).toBe(0o500)
  })

  test('a directory of another layout is started over', async () => {
    const dir = join(fresh(), 'vol')
    mkdirSync(dir)
    writeFileSync(join(dir, 'a'), 'old')
    writeFileSync(join(dir, 'stray'), 'old')
    await writeAtomic(dir, [{path: 'a', content: 'new', mode: 0o644}], {private: false})
    expect(lstatSync(join(dir, 'a')).isSymbolicLink()).toBe(true)
    expect(readFileSync(join(dir, 'a'), 'utf8')).toBe('new')
    expect(existsSync(join(dir, 'stray'))).toBe(false)
  })

  test("the kubelet's path rules", () => {
    expect(payloadPathError('a/b')).toBeUndefined()
    expect(payloadPathError('/a')).toContain('must be relative')
    expect(payloadPathError('a/../b')).toContain("must not contain '..'")
    expect(payloadPathError('..data')).toContain("must not start with '..'")
    expect(payloadPathError('')).toContain('must not be empty')
    expect(payloadPathError('x'.repeat(256))).toContain('255')
  })

  test('a pinned subPath keeps its content after the volume is rewritten', async () => {
    const root = fresh()
    const dir = join(root, 'vol')
    await writeAtomic(dir, [{path: 'conf/a', content: 'v1', mode: 0o644}], {private: false})
    const pinned = await pinSubPath(dir, join(dir, 'conf'), join(root, 'pins', 'c', 'x'))
    expect(pinned).toBe(join(root, 'pins', 'c', 'x'))
    await writeAtomic(dir, [{path: 'conf/a', content: 'v2', mode: 0o644}], {private: false})
    expect(readFileSync(join(dir, 'conf', 'a'), 'utf8')).toBe('v2')
    expect(readFileSync(join(pinned, 'a'), 'utf8')).toBe('v1')
    // Another volume's subPath is left as it is.
    const plain = join(root, 'plain')
    mkdirSync(join(plain, 'sub'), {recursive: true})
    expect(await pinSubPath(plain, join(plain, 'sub'), join(root, 'pins', 'c', 'y'))).toBe(join(plain, 'sub'))
  })
})
