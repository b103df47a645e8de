import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {CoreV1Event, V1Pod} from '@kubernetes/client-node'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

/**
 * What the reference kubelet does where a process node could easily do
 * otherwise (test/conformance/ compares the two side by side): each case
 * through the real API server, as a controller or kubectl sees it.
 */
describeE2e('kubectl: the kubelet behaviour of failing starts', () => {
  const f = new KubectlFixture('kparity')
  /** Every status of the namespace's pods, as the API server wrote them, from a watch. */
  const seen = new Map<string, V1Pod[]>()
  let stopWatch: (() => void) | undefined

  beforeAll(async () => {
    await f.setUp()
    const {Watch} = await import('@kubernetes/client-node')
    const req = await new Watch(f.c.kc).watch(
      `/api/v1/namespaces/${f.ns}/pods`,
      {},
      (_type: string, pod: V1Pod) => {
        const name = pod.metadata!.name!
        seen.set(name, [...(seen.get(name) ?? []), pod])
      },
      () => undefined,
    )
    stopWatch = () => req.abort()
  })
  afterAll(async () => {
    stopWatch?.()
    await f.tearDown()
    await stopAllVnodes()
  })

  const events = async (name: string): Promise<CoreV1Event[]> => (await f.c.core.listNamespacedEvent({namespace: f.ns, fieldSelector: `involvedObject.name=${name}`})).items
  const waitEvent = (name: string, pred: (e: CoreV1Event) => boolean, what: string, timeoutMs = 30_000) => {
    let last: CoreV1Event[] = []
    return waitFor(
      async () => (last = await events(name)).find(pred),
      () => `${name}: ${what} (events: ${last.map((e) => `${e.reason} x${e.count}: ${e.message}`).join(' | ')})`,
      timeoutMs,
      300,
    )
  }
  const condition = (pod: V1Pod, type: string) => pod.status?.conditions?.find((c) => c.type === type)?.status

  test('a missing ConfigMap volume: no sandbox and no podIP until it mounts, FailedMount retried 500 ms doubling; then Running with an IP', async () => {
    const cm = uniqueName('later-cm')
    await f.create({
      metadata: {name: 'nomount'},
      spec: {
        terminationGracePeriodSeconds: 2,
        volumes: [{name: 'v', configMap: {name: cm}}],
        containers: [markedContainer('app', 'setInterval(()=>{},1000)', uniqueName('nomount'), {volumeMounts: [{name: 'v', mountPath: '/cfg'}]})],
      },
    })
    // 0, 0.5, 1.5, 3.5 s: four attempts within seconds (the kubelet's volume manager backoff).
    const failed = await waitEvent('nomount', (e) => e.reason === 'FailedMount' && (e.count ?? 1) >= 4, 'FailedMount x4', 20_000)
    expect(failed.message).toBe(`MountVolume.SetUp failed for volume "v" : configmap "${cm}" not found`)
    const waiting = await f.json('nomount')
    expect(waiting.status?.phase).toBe('Pending')
    expect(condition(waiting, 'PodReadyToStartContainers')).toBe('False')
    expect(waiting.status?.podIP).toBeUndefined()
    expect(waiting.status?.containerStatuses?.[0].state?.waiting?.reason).toBe('ContainerCreating')
    expect(seen.get('nomount')!.every((p) => !p.status?.podIP)).toBe(true)

    await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: cm}, data: {k: 'v'}}})
    await f.waitRow('nomount', (r) => r.status === 'Running', 'Running once the ConfigMap exists (the next mount retry)', 30_000)
    const running = await f.json('nomount')
    expect(condition(running, 'PodReadyToStartContainers')).toBe('True')
    expect(running.status?.podIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
  }, 60_000)

  test('imagePullPolicy Never with an image the image map does not know: ErrImageNeverPull, nothing runs; a mapped image runs', async () => {
    const marker = uniqueName('neverpull')
    await f.create({
      metadata: {name: 'neverpull'},
      spec: {
        containers: [
          {...markedContainer('absent', 'setInterval(()=>{},1000)', marker), image: 'registry.example/absent:1.0', imagePullPolicy: 'Never'},
          {...markedContainer('mapped', 'setInterval(()=>{},1000)', uniqueName('mapped')), imagePullPolicy: 'Never'},
        ],
        terminationGracePeriodSeconds: 2,
      },
    })
    const message = 'Container image "registry.example/absent:1.0" is not present with pull policy of Never'
    await waitFor(async () => (await f.jsonpath('neverpull', '{.status.containerStatuses[0].state.waiting.reason}')) === 'ErrImageNeverPull' || undefined, 'ErrImageNeverPull')
    expect(await f.jsonpath('neverpull', '{.status.containerStatuses[0].name}|{.status.containerStatuses[0].state.waiting.message}|{.status.containerStatuses[1].name}')).toBe(
      `absent|${message}|mapped`,
    )
    await waitFor(async () => (await f.jsonpath('neverpull', '{.status.containerStatuses[1].state.running.startedAt}')) !== '' || undefined, 'the mapped image running')
    const warning = await waitEvent('neverpull', (e) => e.reason === 'ErrImageNeverPull', 'ErrImageNeverPull event')
    expect(warning).toMatchObject({type: 'Warning', message, involvedObject: expect.objectContaining({fieldPath: 'spec.containers{absent}'})})
    await waitEvent('neverpull', (e) => e.reason === 'Failed' && e.message === 'Error: ErrImageNeverPull', 'Failed: Error: ErrImageNeverPull')
    const pulledAbsent = (await events('neverpull')).filter((e) => e.reason === 'Pulled' && e.involvedObject.fieldPath === 'spec.containers{absent}')
    expect(pulledAbsent).toEqual([])
    await f.noProcess(marker)
  })

  test('a failing postStart hook: Pending and ContainerCreating while the hook and the kill run, then PostStartHookError with the kubelet message', async () => {
    const pod = await f.create({
      metadata: {name: 'hookfail'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          markedContainer('app', "process.on('SIGTERM',()=>{});setInterval(()=>{},1000)", uniqueName('hookfail'), {lifecycle: {postStart: {exec: {command: ['/bin/sh', '-c', 'sleep 1; exit 1']}}}}),
        ],
      },
    })
    const hookError = await waitFor(
      async () => {
        const p = await f.json('hookfail')
        return p.status?.containerStatuses?.[0].state?.waiting?.reason === 'PostStartHookError' ? p : undefined
      },
      'PostStartHookError',
      30_000,
      200,
    )
    const cs = hookError.status!.containerStatuses![0]
    expect(cs.state!.waiting!.message).toBe(
      `Exec lifecycle hook ([/bin/sh -c sleep 1; exit 1]) for Container "app" in Pod "hookfail_${f.ns}(${pod.metadata!.uid})" failed - error: command '/bin/sh -c sleep 1; exit 1' exited with 1: , message: ""`,
    )
    expect(cs.restartCount).toBe(0)
    // The process ignores SIGTERM (the hook gives it a second to say so): killed at the end of the 2 s grace.
    expect(cs.lastState?.terminated?.exitCode).toBe(137)
    // Until the hook's sync ended, the API never saw the container running, nor the pod anything but Pending.
    const before = seen.get('hookfail')!.filter((p) => !p.status?.containerStatuses?.[0].lastState?.terminated)
    expect(before.every((p) => (p.status?.phase ?? 'Pending') === 'Pending' && !p.status?.containerStatuses?.[0].state?.running)).toBe(true)
    await waitEvent('hookfail', (e) => e.reason === 'FailedPostStartHook' && e.message === 'PostStartHook failed', 'FailedPostStartHook')
    await waitEvent('hookfail', (e) => e.reason === 'Killing' && e.message === 'FailedPostStartHook', 'Killing: FailedPostStartHook')
  })

  test('a container that cannot start, restartPolicy Always: RunContainerError with the runtime message, then CrashLoopBackOff', async () => {
    await f.create({metadata: {name: 'nostart'}, spec: {containers: [{name: 'app', image: 'node', command: ['/nonexistent/program']}]}})
    const first = await waitFor(
      async () => {
        const p = await f.json('nostart')
        return p.status?.containerStatuses?.[0].state?.waiting?.reason === 'RunContainerError' ? p.status.containerStatuses[0] : undefined
      },
      'RunContainerError',
      30_000,
      200,
    )
    expect(first.state!.waiting!.message).toMatch(/^failed to start container process: exec: "\/nonexistent\/program": /)
    expect(first.lastState?.terminated).toMatchObject({exitCode: 128, reason: 'StartError'})
    await f.waitRow('nostart', (r) => r.status === 'CrashLoopBackOff', 'CrashLoopBackOff', 60_000)
  }, 90_000)

  test('an exec probe failure message is the command output as written', async () => {
    await f.create({
      metadata: {name: 'unready'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          markedContainer('app', 'setInterval(()=>{},1000)', uniqueName('unready'), {
            readinessProbe: {exec: {command: ['/bin/sh', '-c', 'echo not ready; exit 1']}, periodSeconds: 1, failureThreshold: 1},
          }),
        ],
      },
    })
    const e = await waitEvent('unready', (x) => x.reason === 'Unhealthy', 'Unhealthy')
    expect(e).toMatchObject({type: 'Warning', message: 'Readiness probe failed: not ready\n'})
  })
})
