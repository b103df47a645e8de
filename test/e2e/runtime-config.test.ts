import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {describeE2e} from './helpers.js'
import {nodeContainer, RuntimeHarness} from './runtime-harness.js'

describeE2e('runtime: missing ConfigMaps and Secrets', () => {
  const h = new RuntimeHarness()
  beforeAll(async () => {
    await h.setUp({configRetry: {initialMs: 300, maxMs: 1000}})
  })
  afterAll(() => h.tearDown())

  test('a mandatory ConfigMap that is missing: CreateContainerConfigError with the kubelet message and events, then it runs once the ConfigMap appears', async () => {
    await h.run({
      metadata: {name: 'needs-cm'},
      spec: {containers: [nodeContainer('app', `setInterval(()=>{},1000)`, {env: [{name: 'X', valueFrom: {configMapKeyRef: {name: 'later', key: 'k'}}}]})], terminationGracePeriodSeconds: 2},
    })
    const waiting = await h.waitContainer('needs-cm', 'app', (c) => c.state?.waiting?.reason === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(waiting.state!.waiting!.message).toBe('configmap "later" not found')
    const failed = await h.waitEvent('needs-cm', (e) => e.reason === 'Failed', 'Failed event')
    expect(failed).toMatchObject({type: 'Warning', message: 'Error: configmap "later" not found'})
    expect(failed.involvedObject.fieldPath).toBe('spec.containers{app}')
    const vk = await h.waitEvent('needs-cm', (e) => e.reason === 'MandatoryConfigMapNotFound', 'MandatoryConfigMapNotFound')
    expect(vk).toMatchObject({type: 'Warning', message: 'configmap "later" not found'})

    // The key is still missing: the message says so.
    await h.c.core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'later'}, data: {other: 'v'}}})
    const noKey = await h.waitContainer('needs-cm', 'app', (c) => c.state?.waiting?.message?.includes('couldn') === true, 'missing key message')
    expect(noKey.state!.waiting!.message).toBe(`couldn't find key k in ConfigMap ${h.ns}/later`)

    await h.c.core.replaceNamespacedConfigMap({name: 'later', namespace: h.ns, body: {metadata: {name: 'later'}, data: {k: 'v'}}})
    const running = await h.waitContainer('needs-cm', 'app', (c) => !!c.state?.running, 'running after the ConfigMap appeared', 15_000)
    expect(running.restartCount).toBe(0)
  })

  test('a mandatory Secret (envFrom) that is missing blocks the start the same way; MandatorySecretNotFound', async () => {
    await h.run({metadata: {name: 'needs-secret'}, spec: {containers: [nodeContainer('app', `setInterval(()=>{},1000)`, {envFrom: [{secretRef: {name: 'creds'}}]})], terminationGracePeriodSeconds: 2}})
    const waiting = await h.waitContainer('needs-secret', 'app', (c) => c.state?.waiting?.reason === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(waiting.state!.waiting!.message).toBe('secret "creds" not found')
    await h.waitEvent('needs-secret', (e) => e.reason === 'MandatorySecretNotFound' && e.message === 'secret "creds" not found', 'MandatorySecretNotFound')
    await h.c.core.createNamespacedSecret({namespace: h.ns, body: {metadata: {name: 'creds'}, stringData: {TOKEN: 't'}}})
    await h.waitContainer('needs-secret', 'app', (c) => !!c.state?.running, 'running after the Secret appeared', 15_000)
  })

  test('optional references that are missing: the container runs without them; Optional*NotFound events', async () => {
    await h.run({
      metadata: {name: 'optional'},
      spec: {
        containers: [
          nodeContainer('app', `if(process.env.A!==undefined||process.env.B!==undefined)process.exit(9);setInterval(()=>{},1000)`, {
            env: [
              {name: 'A', valueFrom: {configMapKeyRef: {name: 'nope', key: 'k', optional: true}}},
              {name: 'B', valueFrom: {secretKeyRef: {name: 'nope-secret', key: 'k', optional: true}}},
            ],
          }),
        ],
        terminationGracePeriodSeconds: 2,
      },
    })
    await h.waitContainer('optional', 'app', (c) => !!c.state?.running, 'running')
    await h.waitEvent('optional', (e) => e.reason === 'OptionalConfigMapNotFound' && e.type === 'Warning', 'OptionalConfigMapNotFound')
    await h.waitEvent('optional', (e) => e.reason === 'OptionalSecretNotFound', 'OptionalSecretNotFound')
    await new Promise((r) => setTimeout(r, 300))
    expect(h.container('optional', 'app')!.state!.running).toBeDefined()
  })
})
