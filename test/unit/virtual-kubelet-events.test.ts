import {describe, expect, test} from '@jest/globals'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import type {ObjectLookup} from '../../src/emulator/kube/object-manager.js'
import {virtualKubeletEnvEvents} from '../../src/emulator/pods/virtual-kubelet-events.js'

// virtual-kubelet's environment events (internal/podutils/env.go), on objects held in a map.
const objects = (present: Record<string, object>, unreadable: string[] = []): ObjectLookup => ({
  get: async (kind, namespace, name) => {
    const key = `${kind}/${namespace}/${name}`
    if (unreadable.includes(key)) throw new Error('forbidden')
    return (present[key] ?? null) as never
  },
})
const pod = (containers: Partial<V1Container>[], init: Partial<V1Container>[] = []): V1Pod => ({
  metadata: {name: 'p', namespace: 'ns'},
  spec: {initContainers: init.map((c, i) => ({name: `i${i}`, ...c})), containers: containers.map((c, i) => ({name: `c${i}`, ...c}))},
})
const cmKey = (name: string, key: string, optional?: boolean) => ({name: 'V', valueFrom: {configMapKeyRef: {name, key, optional}}})
const secretKey = (name: string, key: string, optional?: boolean) => ({name: 'S', valueFrom: {secretKeyRef: {name, key, optional}}})

describe("virtual-kubelet's environment events", () => {
  test('the four reasons of virtual-kubelet e2e suite, with its messages', async () => {
    const none = objects({})
    expect(await virtualKubeletEnvEvents(pod([{env: [cmKey('config-map-0', 'key_0', true)]}]), none)).toEqual([
      {type: 'Warning', reason: 'OptionalConfigMapNotFound', message: 'skipping optional envvar "V": configmap "config-map-0" not found'},
    ])
    expect(await virtualKubeletEnvEvents(pod([{env: [cmKey('config-map-0', 'key_0', false)]}]), none)).toEqual([
      {type: 'Warning', reason: 'MandatoryConfigMapNotFound', message: 'configmap "config-map-0" not found'},
    ])
    expect(await virtualKubeletEnvEvents(pod([{env: [secretKey('secret-0', 'key_0', true)]}]), none)).toEqual([
      {type: 'Warning', reason: 'OptionalSecretNotFound', message: 'skipping optional envvar "S": secret "secret-0" not found'},
    ])
    expect(await virtualKubeletEnvEvents(pod([{env: [secretKey('secret-0', 'key_0')]}]), none)).toEqual([{type: 'Warning', reason: 'MandatorySecretNotFound', message: 'secret "secret-0" not found'}])
  })

  test('envFrom, missing keys, unreadable objects; nothing for what exists', async () => {
    const o = objects({'ConfigMap/ns/cm': {data: {a: '1'}}, 'Secret/ns/s': {data: {t: 'eA=='}}}, ['Secret/ns/locked'])
    expect(await virtualKubeletEnvEvents(pod([{envFrom: [{configMapRef: {name: 'cm'}}, {secretRef: {name: 's'}}], env: [cmKey('cm', 'a'), secretKey('s', 't')]}]), o)).toEqual([])
    expect(await virtualKubeletEnvEvents(pod([{envFrom: [{configMapRef: {name: 'gone', optional: true}}], env: [cmKey('cm', 'b', true), secretKey('locked', 't', true)]}]), o)).toEqual([
      {type: 'Warning', reason: 'OptionalConfigMapNotFound', message: 'configmap "gone" not found'},
      {type: 'Warning', reason: 'OptionalConfigMapKeyNotFound', message: 'skipping optional envvar "V": key "b" does not exist in configmap "cm"'},
      {type: 'Warning', reason: 'FailedToReadOptionalSecret', message: 'skipping optional envvar "S": failed to read secret "locked"'},
    ])
    expect(await virtualKubeletEnvEvents(pod([{env: [cmKey('cm', 'b')]}]), o)).toEqual([
      {type: 'Warning', reason: 'MandatoryConfigMapKeyNotFound', message: 'key "b" does not exist in configmap "cm"'},
    ])
  })

  test('init containers first, and the first mandatory miss ends the list, as virtual-kubelet returns its error', async () => {
    const events = await virtualKubeletEnvEvents(pod([{env: [secretKey('s1', 'k', true)]}], [{envFrom: [{secretRef: {name: 's0', optional: true}}, {secretRef: {name: 's2'}}]}]), objects({}))
    expect(events.map((e) => `${e.reason} ${e.message}`)).toEqual(['OptionalSecretNotFound secret "s0" not found', 'MandatorySecretNotFound secret "s2" not found'])
  })
})
