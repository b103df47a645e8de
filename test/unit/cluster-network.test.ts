import {describe, expect, test} from '@jest/globals'
import {overlaps, slotIsFree, slotNetwork} from '../../src/cluster/cluster-network.js'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {detectPodNetwork, isLoopbackServer, podNetworkSummary, RequiredPlugins} from '../../src/emulator/runtime/network/detect.js'
import {hostRoutes} from '../../src/emulator/runtime/network/setup.js'
import {portConflictMessage} from '../../src/emulator/runtime/network/port-conflict.js'
import {clusterAlias, parseAlias} from '../../src/common/service-route.js'

describe("a local cluster's addresses", () => {
  test("slot 0 keeps the first cluster's ranges; every slot is distinct from every other", () => {
    expect(slotNetwork(0)).toMatchObject({serviceCidr: '10.0.0.0/24', podCidr: '10.244.0.0/16', clusterDns: '10.0.0.10', kubernetesIp: '10.0.0.1', device: 'vnode-svc0'})
    const nets = Array.from({length: 32}, (_, n) => slotNetwork(n))
    for (const [i, a] of nets.entries()) {
      expect(a.device!.length).toBeLessThanOrEqual(15)
      for (const b of nets.slice(i + 1)) {
        for (const x of [a.serviceCidr, a.podCidr, `${a.apiAddress}/32`]) for (const y of [b.serviceCidr, b.podCidr, `${b.apiAddress}/32`]) expect(overlaps(x, y)).toBe(false)
      }
      // The API address is neither loopback nor link-local: Endpoints may name it.
      expect(a.apiAddress).not.toMatch(/^(127|169\.254)\./)
    }
  })

  test('a slot any route or address of the host covers is not free', () => {
    expect(slotIsFree(0, ['192.0.2.0/24', '192.0.2.2/32'])).toBe(true)
    // Another cluster's service route, a node bridge of another cluster, an address on the API block.
    expect(slotIsFree(0, ['10.0.0.0/24'])).toBe(false)
    expect(slotIsFree(0, ['10.244.3.0/24'])).toBe(false)
    expect(slotIsFree(1, ['198.18.0.2/32'])).toBe(false)
    expect(slotIsFree(1, ['10.0.0.0/24', '10.244.3.0/24'])).toBe(true)
  })

  test('overlaps compares ranges, not strings', () => {
    expect(overlaps('10.0.0.0/16', '10.0.5.0/24')).toBe(true)
    expect(overlaps('10.0.5.7/32', '10.0.5.0/24')).toBe(true)
    expect(overlaps('10.0.1.0/24', '10.0.2.0/24')).toBe(false)
  })
})

describe('why the pod network is off', () => {
  test('off and a loopback API server each say why in one line', async () => {
    expect(await detectPodNetwork('off', true)).toEqual({enabled: false, reason: 'turned off (--pod-network off)'})
    const d = await detectPodNetwork('auto', false, undefined, 'https://127.0.0.1:6443')
    expect(d.enabled).toBe(false)
    expect(d.reason).not.toContain('\n')
    expect(podNetworkSummary(d)).toBe(`host: ${d.reason}`)
    expect(podNetworkSummary({enabled: true})).toBe('pod')
    expect(isLoopbackServer('https://127.0.0.1:6443')).toBe(true)
    expect(isLoopbackServer('https://198.18.0.1:6443')).toBe(false)
    // Not a URL: not loopback (up then fails at the connect, saying which server it could not reach).
    expect(isLoopbackServer('::not a url::')).toBe(false)
  })

  test('the loopback reason names the cure when the rest of the host allows a pod network', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-cni-'))
    try {
      for (const p of RequiredPlugins) writeFileSync(join(dir, p), '#!/bin/sh\n', {mode: 0o755})
      const d = await detectPodNetwork('auto', true, dir, 'https://127.0.0.1:6443')
      // As root with plugins and iptables, loopback is what is left; otherwise root is said first.
      expect(d.reason).toMatch(process.getuid?.() === 0 ? /API server is on loopback.*cluster up/ : /it needs root|iptables/)
      expect((await detectPodNetwork('auto', true, join(dir, 'none'), 'https://127.0.0.1:6443')).reason).toMatch(/it needs root|CNI plugins missing/)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})

describe("the pods' routes to the host", () => {
  const iface = (address: string) => ({address, netmask: '255.255.255.255', family: 'IPv4' as const, mac: '', internal: false, cidr: `${address}/32`})
  test("only the node's own cluster's API address of the local clusters' devices", () => {
    const interfaces = {eth0: [iface('192.0.2.2')], 'vnode-svc0': [iface('198.18.0.1')], 'vnode-svc1': [iface('198.18.0.2')]}
    expect(hostRoutes('https://198.18.0.2:6443', interfaces)).toEqual(['192.0.2.2/32', '198.18.0.2/32'])
    expect(hostRoutes(undefined, interfaces)).toEqual(['192.0.2.2/32'])
    // A kubeconfig whose server is not a URL names no device: the connect that follows says what is wrong.
    expect(hostRoutes('::not a url::', interfaces)).toEqual(['192.0.2.2/32'])
  })

  test("the link to the node's own cluster's kube-proxy namespace, as its /30, never another cluster's", () => {
    const link = (address: string) => ({...iface(address), netmask: '255.255.255.252', cidr: `${address}/30`})
    const interfaces = {
      eth0: [iface('192.0.2.2')],
      'vnode-svc0': [iface('198.18.0.1')],
      'vnode-svc0-kp': [link('198.19.0.1')],
      'vnode-svc1': [iface('198.18.0.2')],
      'vnode-svc1-kp': [link('198.19.1.1')],
    }
    expect(hostRoutes('https://198.18.0.2:6443', interfaces)).toEqual(['192.0.2.2/32', '198.18.0.2/32', '198.19.1.0/30'])
    expect(hostRoutes('https://198.18.0.1:6443', interfaces)).toEqual(['192.0.2.2/32', '198.18.0.1/32', '198.19.0.0/30'])
    expect(hostRoutes('https://127.0.0.1:6443', interfaces)).toEqual(['192.0.2.2/32'])
  })
})

test('the PortInUse advice without a reason still names the pod network', () => {
  expect(portConflictMessage(80, 'another process')).toContain('--pod-network on')
})

test("a device's alias names its cluster and whether its kube-proxy runs", () => {
  expect(parseAlias(clusterAlias('0123456789abcdef'))).toEqual({fingerprint: '0123456789abcdef', kubeProxy: false})
  expect(parseAlias(clusterAlias('0123456789abcdef', true))).toEqual({fingerprint: '0123456789abcdef', kubeProxy: true})
  for (const other of ['', undefined, 'vnode-cluster xyz', 'something else']) expect(parseAlias(other)).toEqual({kubeProxy: false})
})
