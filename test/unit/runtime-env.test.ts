import {describe, expect, test} from '@jest/globals'
import {buildContainerEnv, formatMap, isValidEnvName, podFieldValue, resourceFieldValue, serviceVariables} from '../../src/emulator/runtime/env/env.js'

const node = {nodeName: 'n1', nodeIP: '10.0.0.5', cpuCores: 8, memoryBytes: 16 * 2 ** 30, ephemeralStorageBytes: 100 * 2 ** 30}

describe('env helpers', () => {
  test('service link variables, as pkg/kubelet/envvars writes them', () => {
    const vars = serviceVariables([
      {metadata: {name: 'redis-master'}, spec: {clusterIP: '10.0.0.11', ports: [{port: 6379}, {name: 'sentinel', port: 26379, protocol: 'TCP'}]}},
      {metadata: {name: 'headless'}, spec: {clusterIP: 'None', ports: [{port: 80}]}},
      {metadata: {name: 'external'}, spec: {type: 'ExternalName', externalName: 'x.example.com'}},
    ])
    expect(Object.fromEntries(vars)).toEqual({
      REDIS_MASTER_SERVICE_HOST: '10.0.0.11',
      REDIS_MASTER_SERVICE_PORT: '6379',
      REDIS_MASTER_SERVICE_PORT_SENTINEL: '26379',
      REDIS_MASTER_PORT: 'tcp://10.0.0.11:6379',
      REDIS_MASTER_PORT_6379_TCP: 'tcp://10.0.0.11:6379',
      REDIS_MASTER_PORT_6379_TCP_PROTO: 'tcp',
      REDIS_MASTER_PORT_6379_TCP_PORT: '6379',
      REDIS_MASTER_PORT_6379_TCP_ADDR: '10.0.0.11',
      REDIS_MASTER_PORT_26379_TCP: 'tcp://10.0.0.11:26379',
      REDIS_MASTER_PORT_26379_TCP_PROTO: 'tcp',
      REDIS_MASTER_PORT_26379_TCP_PORT: '26379',
      REDIS_MASTER_PORT_26379_TCP_ADDR: '10.0.0.11',
    })
  })

  test('resourceFieldRef: ceiling of value / divisor; unset limits are the node allocatable', () => {
    const c = {name: 'c', resources: {limits: {cpu: '250m', memory: '100Mi'}, requests: {cpu: '100m'}}}
    expect(resourceFieldValue(c, 'limits.cpu', undefined, node)).toBe('1')
    expect(resourceFieldValue(c, 'limits.cpu', '1m', node)).toBe('250')
    expect(resourceFieldValue(c, 'requests.cpu', '1m', node)).toBe('100')
    expect(resourceFieldValue(c, 'limits.memory', '1Mi', node)).toBe('100')
    expect(resourceFieldValue(c, 'limits.memory', undefined, node)).toBe(String(100 * 2 ** 20))
    expect(resourceFieldValue(c, 'requests.memory', undefined, node)).toBe(String(100 * 2 ** 20))
    expect(resourceFieldValue({name: 'c'}, 'limits.cpu', undefined, node)).toBe('8')
    expect(resourceFieldValue({name: 'c'}, 'limits.memory', '1Gi', node)).toBe('16')
    expect(resourceFieldValue({name: 'c'}, 'limits.gpu', undefined, node)).toBeUndefined()
  })

  test('fieldRef: without a pod network the pod IPs are the node IP; labels and annotations', () => {
    const pod = {metadata: {name: 'p', namespace: 'ns', uid: 'u', labels: {b: '2', a: 'x"y'}}, spec: {containers: [], serviceAccountName: 'sa'}}
    expect(podFieldValue(pod, 'status.podIP', node)).toBe('10.0.0.5')
    expect(podFieldValue(pod, 'spec.serviceAccountName', node)).toBe('sa')
    expect(podFieldValue(pod, "metadata.labels['b']", node)).toBe('2')
    expect(podFieldValue(pod, 'metadata.labels', node)).toBe('a="x\\"y"\nb="2"')
    expect(podFieldValue(pod, 'spec.unknown', node)).toBeUndefined()
    expect(formatMap(undefined)).toBe('')
  })

  test("fieldRef: status.podIP(s) are the pod's own address on the pod network, the node's on the host network", async () => {
    const pod = {metadata: {name: 'p', namespace: 'ns', uid: 'u'}, spec: {containers: []}}
    expect(podFieldValue(pod, 'status.podIP', node, '10.88.0.7')).toBe('10.88.0.7')
    expect(podFieldValue(pod, 'status.podIPs', node, '10.88.0.7')).toBe('10.88.0.7')
    expect(podFieldValue(pod, 'status.hostIP', node, '10.88.0.7')).toBe('10.0.0.5')
    expect(podFieldValue(pod, 'status.podIPs', node)).toBe('10.0.0.5')
    const container = {
      name: 'c',
      env: [
        {name: 'POD_IP', valueFrom: {fieldRef: {fieldPath: 'status.podIP'}}},
        {name: 'HOST_IP', valueFrom: {fieldRef: {fieldPath: 'status.hostIP'}}},
      ],
    }
    const input = {pod, container, node, objects: {get: async () => null}, services: {list: async () => []}, runtime: {}}
    const onPodNetwork = await buildContainerEnv({...input, podIP: '10.88.0.7'})
    expect(onPodNetwork.ok && [onPodNetwork.env.POD_IP, onPodNetwork.env.HOST_IP]).toEqual(['10.88.0.7', '10.0.0.5'])
    const onHostNetwork = await buildContainerEnv(input)
    expect(onHostNetwork.ok && onHostNetwork.env.POD_IP).toBe('10.0.0.5')
  })

  test('env names: any printable ASCII except =', () => {
    expect(isValidEnvName('A_B.c-1')).toBe(true)
    expect(isValidEnvName('a=b')).toBe(false)
    expect(isValidEnvName('')).toBe(false)
    expect(isValidEnvName('tab\there')).toBe(false)
  })
})
