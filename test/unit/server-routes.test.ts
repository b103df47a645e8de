import {describe, expect, test} from '@jest/globals'
import {findRoute, KubeletRoutes} from '../../src/emulator/server/routes/table.js'

describe('the kubelet API route table', () => {
  test('every path and prefix is answered by its own route and by no other (no overlaps, so order does not matter)', () => {
    for (const route of KubeletRoutes) {
      const probes = [...(route.paths ?? []), ...(route.prefix ? [`${route.prefix}ns/pod/c`] : [])]
      expect(probes.length).toBeGreaterThan(0)
      for (const path of probes) {
        expect(findRoute(path)).toBe(route)
        expect(findRoute(path, [...KubeletRoutes].reverse())).toBe(route)
      }
    }
  })

  test('read-only routes take GET and HEAD; exec, attach and portForward take GET and POST and upgrade', () => {
    const streaming = KubeletRoutes.filter((r) => r.kind === 'streaming').map((r) => r.prefix)
    expect(streaming).toEqual(['/exec/', '/attach/', '/portForward/'])
    for (const r of KubeletRoutes) expect(r.methods).toEqual(r.kind === 'streaming' ? ['GET', 'POST'] : ['GET', 'HEAD'])
  })

  test('unknown paths and near misses find no route (the server answers 404)', () => {
    for (const path of ['/', '/healthzz', '/pods/x', '/stats', '/metrics/probes', '/metrics/cadvisor', '/containerLogs', '/exec', '/configz']) expect(findRoute(path)).toBeUndefined()
  })
})
