import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {CoreV1Event, V1Pod} from '@kubernetes/client-node'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {clients, createNamespace, deleteNamespace, describeE2e, kubectl, runDir, serverPort, startVnode, stopAllVnodes, type Clients, type VnodeProcess, uniqueName, waitFor} from './helpers.js'
import {type BadInputCase, corpus, type Expectation} from './badinput-corpus.js'
import {containerStatus, createPod, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'

function meets(pod: V1Pod | undefined, e: Expectation): boolean {
  if (!pod) return false
  if ('phase' in e) return pod.status?.phase === e.phase && pod.status?.reason === e.reason
  const s = containerStatus(pod, e.container)
  if (!s) return false
  if ('running' in e) return !!s.state?.running && (e.ready === undefined || s.ready === e.ready)
  if ('waiting' in e) return s.state?.waiting?.reason === e.waiting && (!e.message || e.message.test(s.state.waiting.message ?? ''))
  const t = s.state?.terminated
  return !!t && t.reason === e.terminated && (e.exitCode === undefined || t.exitCode === e.exitCode) && (!e.message || e.message.test(t.message ?? ''))
}

describeE2e('bad input: a corpus of unusual pod specs, each with its own reason, and the node keeps serving', () => {
  let c: Clients
  let p: VnodeProcess
  const ns = uniqueName('badinput')
  const node = uniqueName('badinput')
  let cases: BadInputCase[] = []

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    const dir = join(runDir(), ns)
    mkdirSync(dir, {recursive: true})
    const noExec = join(dir, 'not-executable')
    writeFileSync(noExec, '#!/bin/sh\necho never\n', {mode: 0o644})
    const configMap = 'settings'
    await c.core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: configMap}, data: {present: 'yes'}}})
    cases = corpus({node, ns, noExec, closedPort: await serverPort(), hostPort: await serverPort(), configMap})
    p = startVnode(node, ['--no-default-taint'])
    await p.ready()
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('at least 40 specs, each gets its specific reason and event; a canary keeps running and a new pod still starts', async () => {
    expect(cases.length).toBeGreaterThanOrEqual(40)
    expect(new Set(cases.map((x) => x.name)).size).toBe(cases.length)
    const canary = podOn(node, ns, 'canary', [nodeContainer('app', 'setInterval(()=>{},1000)')])
    await createPod(c.core, canary)
    await waitPod(c.core, ns, 'canary', (x) => !!containerStatus(x, 'app')?.ready, 'canary ready')

    for (const x of cases.filter((k) => k.first)) {
      await createPod(c.core, x.pod)
      await waitPod(c.core, ns, x.pod.metadata!.name!, (pod) => meets(pod, x.expect), JSON.stringify(x.expect))
    }
    for (const x of cases.filter((k) => !k.first)) await createPod(c.core, x.pod)

    const failures: string[] = []
    let events: CoreV1Event[] = []
    await waitFor(
      async () => {
        events = (await c.core.listNamespacedEvent({namespace: ns})).items
        failures.length = 0
        for (const x of cases) {
          const name = x.pod.metadata!.name!
          const pod = await readPod(c.core, ns, name)
          if (!meets(pod, x.expect))
            failures.push(
              `${x.name}: want ${JSON.stringify(x.expect, (_, v: unknown) => (v instanceof RegExp ? String(v) : v))}, have ${JSON.stringify([pod?.status?.phase, pod?.status?.reason, ...[...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])].map((s) => [s.name.slice(0, 12), s.state, s.ready])])}`,
            )
          else if (!events.some((e) => e.involvedObject.name === name && e.reason === x.event))
            failures.push(
              `${x.name}: no ${x.event} event (has ${events
                .filter((e) => e.involvedObject.name === name)
                .map((e) => e.reason)
                .join(',')})`,
            )
        }
        return failures.length === 0
      },
      () => `every case to reach its reason:\n${failures.join('\n')}`,
      60_000,
      1000,
    )

    // Every other pod was served all along: the canary never restarted, and a new pod still starts.
    const canaryNow = await readPod(c.core, ns, 'canary')
    expect(containerStatus(canaryNow, 'app')).toMatchObject({ready: true, restartCount: 0})
    await createPod(c.core, podOn(node, ns, 'after', [nodeContainer('app', 'process.exit(0)')], {restartPolicy: 'Never'}))
    await waitPod(c.core, ns, 'after', (x) => x.status?.phase === 'Succeeded', 'a new pod to complete')
    expect(p.child.exitCode).toBeNull()
    expect(await p.stop()).toBe(0)
  })
})
