import {describe, expect, test} from '@jest/globals'
import type {V1PodStatus} from '@kubernetes/client-node'
import {needsReconcile} from '../../src/emulator/pods/status-patch.js'

const written = (): V1PodStatus => ({
  phase: 'Running',
  podIP: '10.244.0.5',
  hostIP: '127.0.0.1',
  startTime: new Date('2026-12-01T10:00:00.123Z'),
  conditions: [
    {type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: new Date('2026-12-01T10:00:00.456Z')},
    {type: 'Ready', status: 'True', lastTransitionTime: new Date('2026-12-01T10:00:01.789Z')},
  ],
  containerStatuses: [
    {
      name: 'a',
      ready: true,
      started: true,
      restartCount: 1,
      image: 'busybox',
      imageID: '',
      containerID: 'vnode://1',
      state: {running: {startedAt: new Date('2026-12-01T10:00:01.5Z')}},
      lastState: {terminated: {exitCode: 1, reason: 'Error'}},
    },
  ],
})

describe('needsReconcile: the status in the API against the one written, in what the kubelet owns', () => {
  test('the same status as the API keeps it (times in seconds, other conditions added by others) needs nothing', () => {
    const api: V1PodStatus = JSON.parse(JSON.stringify(written()))
    api.startTime = new Date('2026-12-01T10:00:00Z')
    api.conditions!.push({type: 'DisruptionTarget', status: 'False'})
    api.qosClass = 'BestEffort'
    expect(needsReconcile(api, written())).toBe(false)
  })

  test('a condition, the phase, the address or a container state someone else wrote needs a write', () => {
    const cases: Array<(s: V1PodStatus) => void> = [
      (s) => (s.conditions![1] = {...s.conditions![1], status: 'False', reason: 'Tampered'}),
      (s) => (s.conditions![1] = {...s.conditions![1], message: 'changed'}),
      (s) => (s.conditions = s.conditions!.slice(0, 1)),
      (s) => (s.phase = 'Pending'),
      (s) => (s.podIP = '10.244.0.6'),
      (s) => (s.message = 'someone'),
      (s) => (s.containerStatuses![0].ready = false),
      (s) => (s.containerStatuses![0].restartCount = 0),
      (s) => (s.containerStatuses![0].state = {waiting: {reason: 'CrashLoopBackOff'}}),
      (s) => (s.containerStatuses![0].lastState = {}),
      (s) => (s.containerStatuses = []),
    ]
    for (const change of cases) {
      const api = written()
      change(api)
      expect([change.toString(), needsReconcile(api, written())]).toEqual([change.toString(), true])
    }
    expect(needsReconcile(undefined, written())).toBe(true)
  })
})
