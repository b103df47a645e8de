import {describe, expect, test} from '@jest/globals'
import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {DefaultVolumeChangeDelayMs, DefaultVolumeResyncMs, VolumeRefresher} from '../../src/emulator/runtime/volumes/refresh.js'
import type {TokenSource} from '../../src/emulator/runtime/volumes/tokens.js'
import {FakeClock} from './fake-clock.js'

const pod: V1Pod = {
  metadata: {name: 'p', namespace: 'ns', uid: 'u1'},
  spec: {containers: [{name: 'c'}], volumes: [{name: 'cfg', configMap: {name: 'missing'}}]},
}

describe('volume refresh', () => {
  test('resyncs and writes changes on the runtime clock', async () => {
    const clock = new FakeClock()
    const sandbox = mkdtempSync(join(tmpdir(), 'vnode-refresh-'))
    const failures: string[] = []
    let changed: (() => void) | undefined
    const refresher = new VolumeRefresher({
      pod: () => pod,
      sandbox,
      volumes: {
        node: {nodeName: 'n1', nodeIP: '10.0.0.5', cpuCores: 1, memoryBytes: 2 ** 30, ephemeralStorageBytes: 2 ** 30},
        objects: {get: async () => null},
        tokens: {forget: () => undefined} as unknown as TokenSource,
        core: {} as CoreV1Api,
      },
      objects: {get: async () => null, register: (_p, onChange) => void (changed = () => onChange?.({kind: 'ConfigMap', namespace: 'ns', name: 'missing'})), unregister: () => undefined},
      failed: (m) => failures.push(m),
      clock,
    })
    try {
      refresher.track(pod)
      refresher.enable()
      await clock.advance(DefaultVolumeResyncMs - 1)
      expect(failures).toHaveLength(0)
      await clock.advance(1)
      expect(failures).toEqual([expect.stringContaining('configmap "missing" not found')])
      changed!()
      await clock.advance(DefaultVolumeChangeDelayMs - 1)
      expect(failures).toHaveLength(1)
      await clock.advance(1)
      expect(failures).toHaveLength(2)
    } finally {
      await refresher.release()
      rmSync(sandbox, {recursive: true, force: true})
    }
  })
})
