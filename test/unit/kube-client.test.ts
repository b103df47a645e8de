import {describe, expect, test} from '@jest/globals'
import {RequestCounter, resourceOf} from '../../src/emulator/kube/client.js'

describe('resourceOf', () => {
  test('names the resource and subresource of an API path', () => {
    expect(resourceOf('https://h:6443/api/v1/namespaces/ns/pods/p/status?dryRun=All')).toBe('pods/status')
    expect(resourceOf('https://h:6443/api/v1/namespaces/default/events')).toBe('events')
    expect(resourceOf('https://h/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1')).toBe('leases')
    expect(resourceOf('https://h/api/v1/nodes/n1/status')).toBe('nodes/status')
    expect(resourceOf('/api/v1/nodes')).toBe('nodes')
  })
})

describe('RequestCounter', () => {
  test('counts by method and by resource', () => {
    const c = new RequestCounter()
    c.record('PATCH', 'https://h/api/v1/namespaces/a/pods/x/status')
    c.record('PATCH', 'https://h/api/v1/namespaces/b/pods/y/status')
    c.record('PUT', 'https://h/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n')
    expect(c.total).toBe(3)
    expect(c.byMethod.get('PATCH')).toBe(2)
    expect(c.byResource.get('PATCH pods/status')).toBe(2)
    expect(c.byResource.get('PUT leases')).toBe(1)
  })
})
