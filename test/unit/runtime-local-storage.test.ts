import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {canonicalQuantity, diskUsage, hasLocalStorageLimits, type LocalStorageUsage, localStorageViolation} from '../../src/emulator/runtime/pod/eviction.js'

const MiB = 2 ** 20

function pod(containers: {name: string; limit?: string}[], volumes: {name: string; sizeLimit?: string; medium?: string}[] = []): V1Pod {
  return {
    metadata: {name: 'p', namespace: 'default', uid: 'u'},
    spec: {
      containers: containers.map((c) => ({name: c.name, resources: c.limit ? {limits: {'ephemeral-storage': c.limit}} : undefined})),
      volumes: volumes.map((v) => ({name: v.name, emptyDir: {sizeLimit: v.sizeLimit, medium: v.medium}})),
    },
  }
}

const usage = (u: {emptyDirs?: Record<string, number>; memory?: Record<string, number>; logs?: Record<string, number>; layers?: Record<string, number>}): LocalStorageUsage => ({
  emptyDirs: new Map(Object.entries(u.emptyDirs ?? {})),
  memoryEmptyDirs: new Map(Object.entries(u.memory ?? {})),
  logs: new Map(Object.entries(u.logs ?? {})),
  layers: new Map(Object.entries(u.layers ?? {})),
})

describe('local ephemeral storage limits (the eviction manager)', () => {
  test('only pods that declare a limit or an emptyDir sizeLimit are measured', () => {
    expect(hasLocalStorageLimits(pod([{name: 'a'}], [{name: 'v'}]))).toBe(false)
    expect(hasLocalStorageLimits(pod([{name: 'a', limit: '1Mi'}]))).toBe(true)
    expect(hasLocalStorageLimits(pod([{name: 'a'}], [{name: 'v', sizeLimit: '1Mi'}]))).toBe(true)
    expect(hasLocalStorageLimits(pod([{name: 'a', limit: '0'}], [{name: 'v', sizeLimit: '0'}]))).toBe(false)
  })

  test("an emptyDir over its sizeLimit, in the kubelet's words; at the limit is not over", () => {
    const p = pod([{name: 'a'}], [{name: 'scratch', sizeLimit: '1024Ki'}])
    expect(localStorageViolation(p, usage({emptyDirs: {scratch: MiB}}))).toBeUndefined()
    expect(localStorageViolation(p, usage({emptyDirs: {scratch: MiB + 4096}}))).toBe('Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ')
    // Memory-medium emptyDirs have their own limit too.
    const m = pod([{name: 'a'}], [{name: 'ram', sizeLimit: '1Mi', medium: 'Memory'}])
    expect(localStorageViolation(m, usage({memory: {ram: 2 * MiB}}))).toBe('Usage of EmptyDir volume "ram" exceeds the limit "1Mi". ')
  })

  test("the pod's total (logs and disk emptyDirs, not memory ones) against the sum of its containers' limits comes before a container's own", () => {
    const p = pod([{name: 'a', limit: '1Mi'}, {name: 'b', limit: '1Mi'}, {name: 'c'}], [{name: 'disk'}, {name: 'ram', medium: 'Memory'}])
    expect(localStorageViolation(p, usage({logs: {a: MiB / 2, b: MiB / 2}, emptyDirs: {disk: MiB}, memory: {ram: 10 * MiB}}))).toBeUndefined()
    expect(localStorageViolation(p, usage({logs: {a: MiB / 2, b: MiB / 2}, emptyDirs: {disk: MiB + 4096}}))).toBe('Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ')
    expect(localStorageViolation(p, usage({logs: {a: MiB + 4096, c: 10 * MiB}}))).toBe('Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ')
    expect(localStorageViolation(p, usage({logs: {b: MiB + 4096}}))).toBe('Container b exceeded its local ephemeral storage limit "1Mi". ')
  })

  test('quantities are written as resource.Quantity writes them', () => {
    expect(canonicalQuantity('2048Ki')).toBe('2Mi')
    expect(canonicalQuantity('1500Ki')).toBe('1500Ki')
    expect(canonicalQuantity('1000')).toBe('1k')
    expect(canonicalQuantity('5M')).toBe('5M')
    expect(canonicalQuantity('1Gi')).toBe('1Gi')
  })

  test('disk usage counts allocated blocks once per inode, without following symlinks; a missing tree is 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-du-'))
    try {
      const empty = await diskUsage(dir)
      mkdirSync(join(dir, 'sub'))
      writeFileSync(join(dir, 'sub', 'f'), Buffer.alloc(MiB, 1))
      const one = await diskUsage(dir)
      expect(one - empty).toBeGreaterThanOrEqual(MiB)
      linkSync(join(dir, 'sub', 'f'), join(dir, 'hard'))
      symlinkSync('/usr', join(dir, 'usr'))
      expect(await diskUsage(dir)).toBeLessThan(one + 64 * 1024)
      expect(await diskUsage(join(dir, 'nothing-here'))).toBe(0)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
