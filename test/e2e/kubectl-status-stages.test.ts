import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName} from './helpers.js'

/**
 * The stages a kubelet writes a pod's end in, as `kubectl get -w` shows them:
 * the sync that finds the containers ended writes them with the phase held
 * (the sandbox still there), the terminal phase comes once nothing runs; a
 * deleted pod's containers that never ran lose the reason that kept them
 * waiting, then the sandbox goes, then they are reported lost.
 */
const sandboxReady = '{.status.conditions[?(@.type=="PodReadyToStartContainers")].status}'

describeE2e('kubectl: the stages of a pod’s end', () => {
  const f = new KubectlFixture('kstage')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  /** The index of the first line that matches, failing with the lines when none does. */
  const indexOf = (lines: string[], re: RegExp) => {
    const i = lines.findIndex((l) => re.test(l))
    if (i < 0) throw new Error(`no line matches ${re}: ${JSON.stringify(lines)}`)
    return i
  }

  test('restartPolicy Never, exit 0: Completed with the phase still Running and the sandbox up, then Succeeded with the sandbox gone', async () => {
    const marker = uniqueName('job')
    const w = f.watch('job', ['-o', `jsonpath={.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|${sandboxReady}{"\\n"}`])
    await f.create({metadata: {name: 'job'}, spec: {restartPolicy: 'Never', containers: [markedContainer('app', `setTimeout(() => process.exit(0), 2000)`, marker)]}})
    await w.waitLine((l) => l.startsWith('Succeeded|'), 'Succeeded')
    const lines = [...w.lines]
    const running = indexOf(lines, /^Running\|\|True$/)
    const held = indexOf(lines, /^Running\|Completed\|True$/)
    const done = indexOf(lines, /^Succeeded\|Completed\|False$/)
    expect(running).toBeLessThan(held)
    expect(held).toBeLessThan(done)
    // Never a terminal phase with the sandbox still up: the phase waits for it.
    expect(lines.filter((l) => /^Succeeded\|.*\|True$/.test(l))).toEqual([])
    await kubectl(['delete', 'pod', 'job', '-n', f.ns, '--wait=false'])
    await f.gone('job')
    await f.noProcess(marker)
  })

  test('a sidecar job: the main container ended with the sidecar running (pod Running, not ready), then the sidecar and the sandbox gone (phase held), then Succeeded', async () => {
    const marker = uniqueName('sidejob')
    const ready = '{.status.conditions[?(@.type=="Ready")].reason}'
    const w = f.watch('sidejob', [
      '-o',
      `jsonpath={.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|{.status.initContainerStatuses[0].state.terminated.reason}|${sandboxReady}|${ready}{"\\n"}`,
    ])
    await f.create({
      metadata: {name: 'sidejob'},
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 10,
        initContainers: [{...markedContainer('side', `process.on('SIGTERM', () => setTimeout(() => process.exit(0), 500)); setInterval(() => {}, 1000)`, marker), restartPolicy: 'Always'}],
        containers: [markedContainer('app', `setTimeout(() => process.exit(0), 2000)`, marker)],
      },
    })
    await w.waitLine((l) => l.startsWith('Succeeded|'), 'Succeeded')
    const lines = [...w.lines]
    // The running sidecar keeps the pod Running (the kubelet's getPhase counts it): not ready as any Running pod
    // with a container down, not yet completed.
    const mainEnded = indexOf(lines, /^Running\|Completed\|\|True\|ContainersNotReady$/)
    // The sync kills the sidecar with the sandbox (KillPod); the phase waits for the pod to be terminated.
    const killed = indexOf(lines, /^Running\|Completed\|Completed\|False\|PodCompleted$/)
    const done = indexOf(lines, /^Succeeded\|Completed\|Completed\|False\|PodCompleted$/)
    expect(mainEnded).toBeLessThan(killed)
    expect(killed).toBeLessThan(done)
    await kubectl(['delete', 'pod', 'sidejob', '-n', f.ns, '--wait=false'])
    await f.gone('sidejob')
    await f.noProcess(marker)
  })

  test('a deleted pod whose container never started: ContainerCreating again, then its sandbox gone (Pending), then lost (ContainerStatusUnknown, Failed)', async () => {
    const marker = uniqueName('nocm')
    const w = f.watch('nocm', [
      '-o',
      `jsonpath={.metadata.deletionTimestamp}|{.status.phase}|{.status.containerStatuses[0].state.waiting.reason}{.status.containerStatuses[0].state.terminated.reason}|${sandboxReady}{"\\n"}`,
    ])
    await f.create({
      metadata: {name: 'nocm'},
      spec: {
        terminationGracePeriodSeconds: 5,
        containers: [markedContainer('app', `setInterval(() => {}, 1000)`, marker, {env: [{name: 'G', valueFrom: {configMapKeyRef: {name: 'absent-cm', key: 'greeting'}}}]})],
      },
    })
    await w.waitLine((l) => l === '|Pending|CreateContainerConfigError|True', 'CreateContainerConfigError')
    const del = await kubectl(['delete', 'pod', 'nocm', '-n', f.ns, '--wait=false'])
    expect(del.exitCode).toBe(0)
    await f.gone('nocm')
    const deleting = w.lines.filter((l) => !l.startsWith('|'))
    // The kubelet restarts nothing of a deleted pod, so the reason cache no longer speaks: the default reason.
    const again = indexOf(deleting, /^\S+\|Pending\|ContainerCreating\|True$/)
    const sandboxGone = indexOf(deleting, /^\S+\|Pending\|ContainerCreating\|False$/)
    const lost = indexOf(deleting, /^\S+\|Failed\|ContainerStatusUnknown\|False$/)
    expect(again).toBeLessThan(sandboxGone)
    expect(sandboxGone).toBeLessThan(lost)
    expect(deleting.filter((l) => l.includes('CreateContainerConfigError')).length).toBeLessThanOrEqual(1)
    await f.noProcess(marker)
  })
})
