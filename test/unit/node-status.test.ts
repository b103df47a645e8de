import {describe, expect, test} from '@jest/globals'
import type {V1NodeStatus} from '@kubernetes/client-node'
import type {HostIdentity, HostReading} from '../../src/emulator/node/host.js'
import {buildConditions, buildStatus, comparable, type NodeSpecConfig, pressureFrom, threeWayStatusPatch, LastAppliedStatusAnnotation} from '../../src/emulator/node/node-status.js'

const reading: HostReading = {
  cpuCores: 2,
  memoryTotalBytes: 8 * 2 ** 30,
  memoryAvailableBytes: 4 * 2 ** 30,
  diskTotalBytes: 100 * 2 ** 30,
  diskAvailableBytes: 50 * 2 ** 30,
  pidMax: 32768,
  processes: 300,
}

describe('pressure conditions use the kubelet hard eviction thresholds', () => {
  test('memory under 100Mi available is pressure', () => {
    expect(pressureFrom(reading).MemoryPressure).toBe(false)
    expect(pressureFrom({...reading, memoryAvailableBytes: 99 * 2 ** 20}).MemoryPressure).toBe(true)
  })
  test('disk under 10% free is pressure', () => {
    expect(pressureFrom({...reading, diskAvailableBytes: 9 * 2 ** 30}).DiskPressure).toBe(true)
    expect(pressureFrom({...reading, diskAvailableBytes: 11 * 2 ** 30}).DiskPressure).toBe(false)
  })
  test('fewer than 10% of pid_max left is PID pressure', () => {
    expect(pressureFrom({...reading, processes: 30_000}).PIDPressure).toBe(true)
    expect(pressureFrom(reading).PIDPressure).toBe(false)
  })
})

describe('addresses', () => {
  const identity: HostIdentity = {hostname: 'laptop', machineID: 'm', bootID: 'b', systemUUID: 'u', kernelVersion: 'k', osImage: 'o', operatingSystem: 'linux', architecture: 'amd64'}
  const cfg: NodeSpecConfig = {name: 'n1', nodeIP: '192.0.2.7', port: 10250, labels: {}, taints: [], pods: 110, kubeletVersion: 'v1', runtimeVersion: 'vnode://1'}
  const values = {MemoryPressure: false, DiskPressure: false, PIDPressure: false, Ready: true}

  test("the node IP only: no Hostname address (the API server would dial this host's name first)", () => {
    expect(buildStatus(reading, identity, cfg, values, undefined, new Date()).addresses).toEqual([{type: 'InternalIP', address: '192.0.2.7'}])
  })

  test('a Hostname address an earlier run published is deleted by the next status write', () => {
    const desired = buildStatus(reading, identity, cfg, values, undefined, new Date())
    const last: V1NodeStatus = {
      addresses: [
        {type: 'InternalIP', address: '192.0.2.7'},
        {type: 'Hostname', address: 'laptop'},
      ],
    }
    const patch = threeWayStatusPatch(last, desired) as {status: {addresses: unknown[]}}
    expect(patch.status.addresses).toEqual([
      {type: 'InternalIP', address: '192.0.2.7'},
      {type: 'Hostname', $patch: 'delete'},
    ])
  })
})

describe('buildConditions', () => {
  const values = {MemoryPressure: false, DiskPressure: false, PIDPressure: false, Ready: true}
  test('Ready last, kubelet reasons, transition time moves only on a flip', () => {
    const t0 = new Date('2026-01-01T00:00:00Z')
    const first = buildConditions(values, undefined, t0)
    expect(first.map((c) => c.type)).toEqual(['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready'])
    expect(first[3]).toMatchObject({status: 'True', reason: 'KubeletReady'})
    const t1 = new Date('2026-01-01T00:01:00Z')
    const same = buildConditions(values, first, t1)
    expect(same[3].lastTransitionTime).toEqual(t0)
    expect(same[3].lastHeartbeatTime).toEqual(t1)
    const flipped = buildConditions({...values, Ready: false, notReadyMessage: 'node is shutting down'}, same, t1)
    expect(flipped[3]).toMatchObject({status: 'False', reason: 'KubeletNotReady', message: 'node is shutting down', lastTransitionTime: t1})
  })
})

describe('threeWayStatusPatch', () => {
  const desired: V1NodeStatus = {
    capacity: {cpu: '2', memory: '100Ki'},
    conditions: [{type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'm'}],
    addresses: [{type: 'InternalIP', address: '10.0.0.2'}],
  }

  test('with no last-applied status (someone else created the node) nothing is deleted', () => {
    const patch = threeWayStatusPatch(undefined, desired) as {status: V1NodeStatus; metadata: {annotations: Record<string, string>}}
    expect(patch.status.conditions).toEqual(JSON.parse(JSON.stringify(desired.conditions)))
    expect(JSON.stringify(patch)).not.toContain('$patch')
    expect(JSON.parse(patch.metadata.annotations[LastAppliedStatusAnnotation])).toEqual(comparable(desired))
  })

  test('what vnode wrote before and no longer wants is deleted; foreign fields are never mentioned', () => {
    const last: V1NodeStatus = {
      capacity: {cpu: '2', memory: '100Ki', 'example.com/gpu': '1'},
      conditions: [
        {type: 'Ready', status: 'True'},
        {type: 'VnodeOld', status: 'True'},
      ],
      addresses: [
        {type: 'InternalIP', address: '10.0.0.2'},
        {type: 'ExternalIP', address: '1.2.3.4'},
      ],
    }
    const patch = threeWayStatusPatch(last, desired) as {status: {conditions: unknown[]; capacity: Record<string, unknown>; addresses: unknown[]}}
    expect(patch.status.conditions).toContainEqual({type: 'VnodeOld', $patch: 'delete'})
    expect(patch.status.capacity['example.com/gpu']).toBeNull()
    expect(patch.status.addresses).toContainEqual({type: 'ExternalIP', $patch: 'delete'})
    expect(JSON.stringify(patch)).not.toContain('KernelDeadlock')
  })

  test('the stash ignores heartbeat times, so an unchanged status compares equal', () => {
    const a = comparable({conditions: [{type: 'Ready', status: 'True', lastHeartbeatTime: new Date(1)}]})
    const b = comparable({conditions: [{type: 'Ready', status: 'True', lastHeartbeatTime: new Date(2)}]})
    expect(a).toEqual(b)
  })
})
