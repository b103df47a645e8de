import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {describeE2e} from './helpers.js'
import {nodeContainer, RuntimeHarness} from './runtime-harness.js'

describeE2e('runtime: missing ConfigMaps and Secrets', () => {
  const h = new RuntimeHarness()
  beforeAll(async () => {
    await h.setUp({configRetry: {initialMs: 300, maxMs: 1000}})
  })
  afterAll(() => h.tearDown())

  test('a mandatory ConfigMap that is missing: CreateContainerConfigError with the kubelet message and events (Pulled, then Failed, on every sync), then it runs once the ConfigMap appears', async () => {
    await h.run({
      metadata: {name: 'needs-cm'},
      spec: {containers: [nodeContainer('app', `setInterval(()=>{},1000)`, {env: [{name: 'X', valueFrom: {configMapKeyRef: {name: 'later', key: 'k'}}}]})], terminationGracePeriodSeconds: 2},
    })
    const waiting = await h.waitContainer('needs-cm', 'app', (c) => c.state?.waiting?.reason === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(waiting.state!.waiting!.message).toBe('configmap "later" not found')
    const failed = await h.waitEvent('needs-cm', (e) => e.reason === 'Failed', 'Failed event')
    expect(failed).toMatchObject({type: 'Warning', message: 'Error: configmap "later" not found'})
    expect(failed.involvedObject.fieldPath).toBe('spec.containers{app}')
    // The kubelet retries on each sync: the image is reported, then the config fails again.
    await h.waitEvent('needs-cm', (e) => e.reason === 'Failed' && (e.count ?? 1) >= 2, 'a second Failed event')
    const pulled = await h.waitEvent('needs-cm', (e) => e.reason === 'Pulled', 'Pulled event')
    expect(pulled.count ?? 1).toBeGreaterThanOrEqual(2)
    // virtual-kubelet's reasons are not the kubelet's.
    expect((await h.events('needs-cm')).map((e) => e.reason)).not.toContain('MandatoryConfigMapNotFound')

    // The key is still missing: the message says so.
    await h.c.core.createNamespacedConfigMap({namespace: h.ns, body: {metadata: {name: 'later'}, data: {other: 'v'}}})
    const noKey = await h.waitContainer('needs-cm', 'app', (c) => c.state?.waiting?.message?.includes('couldn') === true, 'missing key message')
    expect(noKey.state!.waiting!.message).toBe(`couldn't find key k in ConfigMap ${h.ns}/later`)

    await h.c.core.replaceNamespacedConfigMap({name: 'later', namespace: h.ns, body: {metadata: {name: 'later'}, data: {k: 'v'}}})
    const running = await h.waitContainer('needs-cm', 'app', (c) => !!c.state?.running, 'running after the ConfigMap appeared', 15_000)
    expect(running.restartCount).toBe(0)
  })

  test('a mandatory Secret (envFrom) that is missing blocks the start the same way, with the kubelet Failed event', async () => {
    await h.run({metadata: {name: 'needs-secret'}, spec: {containers: [nodeContainer('app', `setInterval(()=>{},1000)`, {envFrom: [{secretRef: {name: 'creds'}}]})], terminationGracePeriodSeconds: 2}})
    const waiting = await h.waitContainer('needs-secret', 'app', (c) => c.state?.waiting?.reason === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(waiting.state!.waiting!.message).toBe('secret "creds" not found')
    await h.waitEvent('needs-secret', (e) => e.reason === 'Failed' && e.message === 'Error: secret "creds" not found', 'Failed event')
    expect((await h.events('needs-secret')).map((e) => e.reason)).not.toContain('MandatorySecretNotFound')
    await h.c.core.createNamespacedSecret({namespace: h.ns, body: {metadata: {name: 'creds'}, stringData: {TOKEN: 't'}}})
    await h.waitContainer('needs-secret', 'app', (c) => !!c.state?.running, 'running after the Secret appeared', 15_000)
  })

  test('optional references that are missing: the container runs without them, and nothing is reported (the kubelet emits no event)', async () => {
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
    // Started is recorded after everything the start decided.
    await h.waitEvent('optional', (e) => e.reason === 'Started', 'Started')
    expect((await h.events('optional')).map((e) => `${e.type}/${e.reason}`).sort()).toEqual(['Normal/Created', 'Normal/Pulled', 'Normal/Started'])
    await new Promise((r) => setTimeout(r, 300))
    expect(h.container('optional', 'app')!.state!.running).toBeDefined()
  })
})
