import {describe, expect, test} from '@jest/globals'
import {bridgeName, conflist, defaultPodCidr, firstHost, isIpv4Cidr, podChain} from '../../src/emulator/runtime/network/config.js'
import {portMappings} from '../../src/emulator/runtime/network/pod-attachment.js'
import {portConflictMessage} from '../../src/emulator/runtime/network/port-conflict.js'

describe('the node network config', () => {
  test('the gateway is the first host address of the pod CIDR', () => {
    expect(firstHost('10.244.3.0/24')).toBe('10.244.3.1')
    expect(firstHost('10.244.3.77/24')).toBe('10.244.3.1')
    expect(firstHost('10.88.0.0/16')).toBe('10.88.0.1')
  })

  test('bridge names fit IFNAMSIZ and differ per node; the default pod CIDR is a /24 of 10.89.0.0/16', () => {
    expect(bridgeName('a').length).toBeLessThanOrEqual(15)
    expect(bridgeName('a')).not.toBe(bridgeName('b'))
    expect(defaultPodCidr('node-1')).toMatch(/^10\.89\.\d{1,3}\.0\/24$/)
    expect(isIpv4Cidr('10.244.0.0/24')).toBe(true)
    expect(isIpv4Cidr('fd00::/64')).toBe(false)
    expect(isIpv4Cidr(undefined)).toBe(false)
  })

  test('no masquerade, no gateway mode (it would switch on ip_forward), no default route, portmap without snat', () => {
    const list = conflist({nodeName: 'n', podCidr: '10.244.1.0/24', gateway: '10.244.1.1', bridge: 'vnodex', ipamDir: '/s/ipam', routes: ['10.0.0.0/24']})
    const [bridge, portmap] = list.plugins
    expect(bridge).toMatchObject({type: 'bridge', bridge: 'vnodex', isGateway: false, isDefaultGateway: false, ipMasq: false})
    const ipam = bridge.ipam as {routes: Array<{dst: string; gw: string}>; dataDir: string}
    expect(ipam.routes).toEqual([{dst: '10.0.0.0/24', gw: '10.244.1.1'}])
    expect(ipam.routes.some((r) => r.dst === '0.0.0.0/0')).toBe(false)
    expect(ipam.dataDir).toBe('/s/ipam')
    expect(portmap).toMatchObject({type: 'portmap', snat: false, capabilities: {portMappings: true}})
  })

  test('a pod runs portmap only when it has hostPort mappings, and then with them as its runtimeConfig', () => {
    const list = conflist({nodeName: 'n', podCidr: '10.244.1.0/24', gateway: '10.244.1.1', bridge: 'vnodex', ipamDir: '/s/ipam', routes: []})
    expect(podChain(list, []).plugins.map((p) => p.type)).toEqual(['bridge'])
    const mapped = podChain(list, [{hostPort: 8080, containerPort: 80, protocol: 'tcp'}])
    expect(mapped.plugins.map((p) => p.type)).toEqual(['bridge', 'portmap'])
    expect(mapped.plugins[1]).toMatchObject({snat: false, runtimeConfig: {portMappings: [{hostPort: 8080, containerPort: 80, protocol: 'tcp'}]}})
    expect(mapped.name).toBe(list.name)
    // The node's own list is left as it was.
    expect(list.plugins[1]).not.toHaveProperty('runtimeConfig')
  })

  test('hostPorts become portmap mappings; ports without one do not', () => {
    const pod = {spec: {containers: [{name: 'a', ports: [{containerPort: 80, hostPort: 8080}, {containerPort: 81}, {containerPort: 53, hostPort: 5353, protocol: 'UDP'}]}]}}
    expect(portMappings(pod)).toEqual([
      {hostPort: 8080, containerPort: 80, protocol: 'tcp'},
      {hostPort: 5353, containerPort: 53, protocol: 'udp'},
    ])
  })

  test('the conflict message names the port, the holder, the pod network and the hostPort advice', () => {
    const m = portConflictMessage(8080, 'pod default/web-1', [{containerPort: 8080}], 'it needs root')
    expect(m).toContain('containerPort 8080/TCP is already in use on this host by pod default/web-1')
    expect(m).toContain('The pod network (a network namespace and address per pod) is off on this node: it needs root')
    expect(m).toContain('--pod-network on')
    expect(m).toContain('hostPort: 8080')
  })

  test('no hostPort advice for a container that declares that hostPort already', () => {
    const m = portConflictMessage(8080, 'process 12 (nginx)', [{containerPort: 8080, hostPort: 8080}], 'it needs root')
    expect(m).not.toContain('hostPort')
    expect(m).toContain('it needs root')
  })
})
