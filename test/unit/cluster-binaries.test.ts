import {afterAll, describe, expect, test} from '@jest/globals'
import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {findBinaries} from '../../src/cluster/binaries.js'
import {ControlPlaneBinaries} from '../../src/cluster/paths.js'

const tmp = mkdtempSync(join(tmpdir(), 'vnode-bins-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

function dirWith(name: string, bins: readonly string[]): string {
  const dir = join(tmp, name)
  mkdirSync(dir, {recursive: true})
  for (const b of bins) {
    writeFileSync(join(dir, b), '#!/bin/sh\n')
    chmodSync(join(dir, b), 0o755)
  }
  return dir
}

describe('finding the control plane binaries', () => {
  const env = (extra: Record<string, string>) => ({VNODE_CACHE_DIR: join(tmp, 'no-cache'), PATH: '', ...extra})

  test('--bin-dir first, then $KUBEBUILDER_ASSETS, then the cache, then PATH, binary by binary', () => {
    const flag = dirWith('flag', ['etcd'])
    const envtest = dirWith('envtest', ['etcd', 'kube-apiserver', 'kubectl'])
    const path = dirWith('path', ControlPlaneBinaries)
    const found = findBinaries(flag, env({KUBEBUILDER_ASSETS: envtest, PATH: path}))
    expect(found.etcd).toBe(join(flag, 'etcd'))
    expect(found['kube-apiserver']).toBe(join(envtest, 'kube-apiserver'))
    expect(found['kube-scheduler']).toBe(join(path, 'kube-scheduler'))
  })

  test('a non-executable file does not count, and what is missing is named with the build command', () => {
    const dir = join(tmp, 'noexec')
    mkdirSync(dir, {recursive: true})
    writeFileSync(join(dir, 'etcd'), '')
    expect(() => findBinaries(dir, env({}))).toThrow(/control plane binaries not found: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl .*npm run controlplane:build/)
  })
})
