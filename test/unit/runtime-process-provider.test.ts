import {afterEach, describe, expect, test} from '@jest/globals'
import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import type {EventRecorder} from '../../src/emulator/kube/events.js'
import type {ReferencedObjects} from '../../src/emulator/kube/object-manager.js'
import type {ProviderContext} from '../../src/emulator/provider/handler.js'
import {ProcessProvider} from '../../src/emulator/runtime/process-provider.js'
import {tempDir} from './temp-dirs.js'

/** The provider over bare host processes, with nothing of an API server behind its context. */
function provider() {
  const stateDir = tempDir('vnode-provider-')
  const recorder = {record: async () => undefined, forget: () => undefined} as unknown as EventRecorder
  const objects = {register: () => undefined, unregister: () => undefined} as unknown as ReferencedObjects
  const ctx: ProviderContext = {nodeName: 'n', nodeIP: '127.0.0.1', stateDir, core: {} as CoreV1Api, objects, services: {list: async () => []}, recorder, knownPod: () => undefined}
  const p = new ProcessProvider(ctx, {path: process.env.PATH, sync: {relistPeriodMs: 50}, containerGCPeriodMs: 0})
  const notified: V1Pod[] = []
  p.notifyPods((pod) => void notified.push(pod))
  return {p, notified, stateDir}
}

function pod(name: string, script: string): V1Pod {
  return {
    metadata: {name, namespace: 'ns', uid: `uid-${name}`},
    spec: {terminationGracePeriodSeconds: 5, containers: [{name: 'app', image: 'busybox', command: ['/bin/sh', '-c', script]}]},
    status: {},
  }
}

const open: ProcessProvider[] = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
})

describe('ProcessProvider without an API server', () => {
  test('createPod runs the pod and reports it; deletePod stops it; cleanupPod forgets it and its sandbox', async () => {
    const {p, notified, stateDir} = provider()
    open.push(p)
    await p.ready()
    const web = pod('web', 'trap "exit 0" TERM; while :; do sleep 0.05; done')
    await p.createPod(web)
    expect(p.size).toBe(1)
    expect((await p.getPodStatus('ns', 'web'))?.containerStatuses?.[0].state?.running).toBeDefined()
    expect(notified.at(-1)?.status?.containerStatuses?.[0].state?.running).toBeDefined()
    expect((await p.getPods()).map((x) => x.metadata?.name)).toEqual(['web'])
    expect(p.isContainerRunning({namespace: 'ns', pod: 'web', container: 'app'})).toBe(true)
    await p.deletePod(web, 5)
    expect((await p.getPodStatus('ns', 'web'))?.containerStatuses?.[0].state?.terminated).toMatchObject({exitCode: 0, reason: 'Completed'})
    expect(p.isContainerRunning({namespace: 'ns', pod: 'web', container: 'app'})).toBe(false)
    expect(existsSync(join(stateDir, 'pods', 'uid-web'))).toBe(true)
    await p.cleanupPod(web)
    expect(p.size).toBe(0)
    expect(existsSync(join(stateDir, 'pods', 'uid-web'))).toBe(false)
    expect(await p.getPodStatus('ns', 'web')).toBeUndefined()
  })

  test('a pod the provider does not run is NotFound for update and delete', async () => {
    const {p} = provider()
    open.push(p)
    await p.ready()
    await expect(p.updatePod(pod('nope', 'true'))).rejects.toThrow('pod ns/nope is not running on this node')
    await expect(p.deletePod(pod('nope', 'true'), 0)).rejects.toThrow(/nope/)
  })
})
