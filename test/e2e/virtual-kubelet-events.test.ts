import {describe, expect, test} from '@jest/globals'
import type * as k8s from '@kubernetes/client-node'
import {describeE2e, nodeContainer, nodeWithNamespace, waitFor, type NodeFixture} from './helpers.js'

/**
 * `up --virtual-kubelet-events`: virtual-kubelet's own reasons for the
 * ConfigMaps and Secrets an environment refers to, which virtual-kubelet's
 * e2e suite (test/e2e/basic.go) waits for, recorded beside the kubelet's
 * events; without the flag the node records only the kubelet's.
 * The pods are those of virtual-kubelet's framework (framework/env.go): one
 * container, one env var from key_0 of config-map-0 or secret-0, none of
 * which exist.
 */
const Keep = 'setInterval(() => {}, 1000)'

type Ref = 'configMapKeyRef' | 'secretKeyRef'
const cases: {name: string; ref: Ref; optional: boolean; reason: string; message: string}[] = [
  {name: 'optional-secret', ref: 'secretKeyRef', optional: true, reason: 'OptionalSecretNotFound', message: 'skipping optional envvar "SECRET_0_KEY_0": secret "secret-0" not found'},
  {name: 'mandatory-secret', ref: 'secretKeyRef', optional: false, reason: 'MandatorySecretNotFound', message: 'secret "secret-0" not found'},
  {name: 'optional-cm', ref: 'configMapKeyRef', optional: true, reason: 'OptionalConfigMapNotFound', message: 'skipping optional envvar "CONFIG_MAP_0_KEY_0": configmap "config-map-0" not found'},
  {name: 'mandatory-cm', ref: 'configMapKeyRef', optional: false, reason: 'MandatoryConfigMapNotFound', message: 'configmap "config-map-0" not found'},
]

function envPod(f: NodeFixture, c: (typeof cases)[number]): k8s.V1Pod {
  const env: k8s.V1EnvVar =
    c.ref === 'secretKeyRef'
      ? {name: 'SECRET_0_KEY_0', valueFrom: {secretKeyRef: {name: 'secret-0', key: 'key_0', optional: c.optional}}}
      : {name: 'CONFIG_MAP_0_KEY_0', valueFrom: {configMapKeyRef: {name: 'config-map-0', key: 'key_0', optional: c.optional}}}
  return {
    metadata: {name: c.name},
    spec: {nodeName: f.node, enableServiceLinks: false, terminationGracePeriodSeconds: 1, containers: [nodeContainer('c', Keep, {env: [env]})]},
  }
}

const events = async (f: NodeFixture, name: string) => (await f.c.core.listNamespacedEvent({namespace: f.ns, fieldSelector: `involvedObject.name=${name}`})).items

/** The pod's state as virtual-kubelet's suite waits for it: Ready (optional) or waiting on the missing reference (mandatory). */
async function settled(f: NodeFixture, c: (typeof cases)[number]): Promise<k8s.V1Pod> {
  return waitFor(
    async () => {
      const p = await f.c.core.readNamespacedPod({name: c.name, namespace: f.ns})
      const cs = p.status?.containerStatuses?.[0]
      if (c.optional) return p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ? p : undefined
      return cs?.state?.waiting?.reason === 'CreateContainerConfigError' ? p : undefined
    },
    `${c.name} ${c.optional ? 'Ready' : 'waiting in CreateContainerConfigError'}`,
    30_000,
  )
}

describeE2e("up --virtual-kubelet-events: virtual-kubelet's reasons beside the kubelet's", () => {
  describe('with the flag', () => {
    const f = nodeWithNamespace('vkev', ['--virtual-kubelet-events'])

    test.each(cases)("$name: $reason, and the kubelet's own events as well", async (c) => {
      await f.c.core.createNamespacedPod({namespace: f.ns, body: envPod(f, c)})
      await settled(f, c)
      const vk = await waitFor(async () => (await events(f, c.name)).find((e) => e.reason === c.reason), `a ${c.reason} event on ${c.name}`, 20_000)
      const all = await events(f, c.name)
      // Recorded by the node, as its other events of the pod.
      const component = all.find((e) => e.reason !== c.reason)?.source?.component
      expect(vk).toMatchObject({type: 'Warning', message: c.message, source: {component, host: f.node}})
      const reasons = all.map((e) => e.reason)
      // In addition, not instead: the kubelet's events of the same pod are still there.
      if (c.optional) expect(reasons).toEqual(expect.arrayContaining(['Started']))
      else
        await waitFor(
          async () => (await events(f, c.name)).some((e) => e.reason === 'Failed' && /secret "secret-0" not found|configmap "config-map-0" not found/.test(e.message ?? '')),
          `the kubelet's Failed event on ${c.name}`,
          20_000,
        )
    })

    test('a pod whose references all exist gets none of them', async () => {
      await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: 'config-map-0'}, data: {key_0: 'v'}}})
      const c = {...cases[3], name: 'present-cm'}
      await f.c.core.createNamespacedPod({namespace: f.ns, body: envPod(f, c)})
      await settled(f, {...c, optional: true})
      const reasons = (await events(f, c.name)).map((e) => e.reason)
      expect(reasons).toContain('Started')
      expect(reasons.filter((r) => /ConfigMap|Secret/.test(r ?? ''))).toEqual([])
    })
  })

  describe('without it (the default)', () => {
    const f = nodeWithNamespace('vkoff')

    test.each(cases)("$name: only the kubelet's events", async (c) => {
      await f.c.core.createNamespacedPod({namespace: f.ns, body: envPod(f, c)})
      await settled(f, c)
      // The kubelet's events of the pod have come (Started, or Failed for the missing reference): a VK event would be among them by now.
      await waitFor(async () => (await events(f, c.name)).some((e) => e.reason === (c.optional ? 'Started' : 'Failed')), `the kubelet's events on ${c.name}`, 20_000)
      await new Promise((r) => setTimeout(r, 1000))
      const reasons = (await events(f, c.name)).map((e) => e.reason)
      expect(reasons).not.toContain(c.reason)
    })
  })
})
