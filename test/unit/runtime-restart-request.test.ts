import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {RestartAnnotation} from '../../src/common/labels.js'
import {parseRestartRequest, restartRequested} from '../../src/emulator/runtime/pod/update.js'

const pod = (value?: string): V1Pod => ({metadata: {name: 'p', annotations: value === undefined ? {} : {[RestartAnnotation]: value}}, spec: {containers: []}})

describe('the restart annotation (vnode.dev/restart)', () => {
  test('its value is <container>:<generation>; anything else is not a request', () => {
    expect(parseRestartRequest('app:3')).toEqual({container: 'app', generation: '3'})
    expect(parseRestartRequest('my-app:1733333333-2')).toEqual({container: 'my-app', generation: '1733333333-2'})
    for (const bad of [undefined, '', 'app', ':3', 'App:3', 'app:', 'app: 3', '-app:1']) expect(parseRestartRequest(bad)).toBeUndefined()
  })

  test('a restart is asked for only when the value changes to a valid one', () => {
    expect(restartRequested(pod(), pod('app:1'))).toEqual({container: 'app', value: 'app:1'})
    expect(restartRequested(pod('app:1'), pod('app:2'))).toEqual({container: 'app', value: 'app:2'})
    expect(restartRequested(pod('app:1'), pod('sidecar:1'))).toEqual({container: 'sidecar', value: 'sidecar:1'})
    expect(restartRequested(pod('app:2'), pod('app:2'))).toBeUndefined()
    expect(restartRequested(pod('app:2'), pod())).toBeUndefined()
    expect(restartRequested(pod(), pod('not a request'))).toBeUndefined()
  })
})
