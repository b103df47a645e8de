import {describe, expect, test} from '@jest/globals'
import type {V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {buildPodStatus, getPhase, type StatusInput} from '../../src/emulator/pods/status.js'

const t0 = new Date('2030-01-01T00:00:00.400Z')
const t1 = new Date('2030-01-01T00:00:07.900Z')

function pod(extra: Partial<V1Pod['spec']> = {}, status?: V1Pod['status']): V1Pod {
  return {
    metadata: {name: 'p', namespace: 'ns', uid: 'u1'},
    spec: {containers: [{name: 'app', image: 'img'}], restartPolicy: 'Always', ...extra},
    status: status ?? {phase: 'Pending', qosClass: 'BestEffort'},
  }
}

const running = (name: string, ready = true): V1ContainerStatus => ({
  name,
  image: 'img',
  imageID: '',
  ready,
  started: true,
  restartCount: 0,
  containerID: `test://${name}`,
  state: {running: {startedAt: t0}},
})
const exited = (name: string, exitCode: number): V1ContainerStatus => ({
  name,
  image: 'img',
  imageID: '',
  ready: false,
  started: false,
  restartCount: 0,
  state: {terminated: {exitCode, reason: exitCode ? 'Error' : 'Completed', finishedAt: t0}},
})

function build(p: V1Pod, over: Partial<StatusInput> = {}) {
  return buildPodStatus({pod: p, nodeIP: '10.1.2.3', now: t0, sandboxReady: false, podIsTerminal: false, couldHaveRunningContainers: true, ...over})
}

const cond = (s: ReturnType<typeof build>, type: string) => s.conditions!.find((c) => c.type === type)

describe('pod status building', () => {
  test('ephemeral containers: their own status list, no say in the phase or readiness; lost ones terminated with the pod', () => {
    const p = pod({ephemeralContainers: [{name: 'dbg', image: 'busybox'}]})
    const s = build(p, {reported: {containerStatuses: [running('app')], ephemeralContainerStatuses: [exited('dbg', 3)]}, sandboxReady: true})
    expect(s.phase).toBe('Running')
    expect(cond(s, 'Ready')!.status).toBe('True')
    expect(s.ephemeralContainerStatuses).toEqual([expect.objectContaining({name: 'dbg', state: {terminated: expect.objectContaining({exitCode: 3})}})])
    const waiting = build(p, {reported: {containerStatuses: [running('app')]}, sandboxReady: true})
    expect(waiting.ephemeralContainerStatuses).toEqual([expect.objectContaining({name: 'dbg', state: {waiting: {reason: 'ContainerCreating'}}})])
    const ended = build(p, {reported: {containerStatuses: [exited('app', 0)], ephemeralContainerStatuses: [running('dbg')]}, podIsTerminal: true, couldHaveRunningContainers: false})
    expect(ended.ephemeralContainerStatuses![0].state!.terminated!.exitCode).toBe(137)
    expect(build(pod()).ephemeralContainerStatuses).toBeUndefined()
  })

  test('a pod nothing was reported for: Pending, ContainerCreating, the five conditions in kubelet order with their reasons', () => {
    const s = build(pod())
    expect(s.phase).toBe('Pending')
    expect(s.containerStatuses).toEqual([expect.objectContaining({name: 'app', image: 'img', ready: false, restartCount: 0, state: {waiting: {reason: 'ContainerCreating'}}})])
    expect(s.conditions!.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['PodReadyToStartContainers', 'False', undefined],
      ['Initialized', 'True', undefined],
      ['Ready', 'False', 'ContainersNotReady'],
      ['ContainersReady', 'False', 'ContainersNotReady'],
      ['PodScheduled', 'True', undefined],
    ])
    expect(cond(s, 'Ready')!.message).toBe('containers with unready status: [app]')
    expect(s.hostIP).toBe('10.1.2.3')
    expect(s.hostIPs).toEqual([{ip: '10.1.2.3'}])
    expect(s.podIP).toBeUndefined()
    // Second precision, as the kubelet writes times.
    expect(s.startTime).toEqual(new Date('2030-01-01T00:00:00Z'))
    expect(s.qosClass).toBe('BestEffort')
  })

  test('running and ready: Running, all conditions True, podIP is the node IP, startTime and unchanged transition times kept', () => {
    const first = build(pod(), {reported: {containerStatuses: [running('app', false)]}, sandboxReady: true})
    expect(first.phase).toBe('Running')
    const second = build(pod(), {reported: {containerStatuses: [running('app')]}, sandboxReady: true, previous: first, now: t1})
    expect(second.phase).toBe('Running')
    expect(second.conditions!.every((c) => c.status === 'True')).toBe(true)
    expect(second.podIP).toBe('10.1.2.3')
    expect(second.podIPs).toEqual([{ip: '10.1.2.3'}])
    expect(second.startTime).toEqual(first.startTime)
    expect(cond(second, 'PodScheduled')!.lastTransitionTime).toEqual(cond(first, 'PodScheduled')!.lastTransitionTime)
    expect(cond(second, 'Ready')!.lastTransitionTime).toEqual(new Date('2030-01-01T00:00:07Z'))
  })

  test('init containers: PodInitializing and Initialized=False/ContainersNotInitialized listing the incomplete ones', () => {
    const p = pod({initContainers: [{name: 'init', image: 'img'}]})
    const s = build(p, {sandboxReady: true, reported: {initContainerStatuses: [running('init', false)]}})
    expect(s.phase).toBe('Pending')
    expect(s.containerStatuses![0].state).toEqual({waiting: {reason: 'PodInitializing'}})
    expect(cond(s, 'Initialized')).toMatchObject({status: 'False', reason: 'ContainersNotInitialized', message: 'containers with incomplete status: [init]'})
  })

  test('restartPolicy Never, all exited 0: Succeeded, held at the previous phase while processes could still run', () => {
    const p = pod({restartPolicy: 'Never'})
    const reported = {containerStatuses: [exited('app', 0)]}
    const previous = build(p, {reported: {containerStatuses: [running('app')]}, sandboxReady: true})
    const held = build(p, {reported, previous, sandboxReady: true, couldHaveRunningContainers: true})
    expect(held.phase).toBe('Running')
    // The status manager holds the phase back, not generateAPIPodStatus' conditions: not ready, PodCompleted, already.
    expect(cond(held, 'Ready')).toMatchObject({status: 'False', reason: 'PodCompleted'})
    expect(cond(held, 'ContainersReady')).toMatchObject({status: 'False', reason: 'PodCompleted'})
    expect(cond(held, 'Initialized')).toMatchObject({status: 'True', reason: 'PodCompleted'})
    const done = build(p, {reported, previous, couldHaveRunningContainers: false, podIsTerminal: true})
    expect(done.phase).toBe('Succeeded')
    expect(cond(done, 'Ready')).toMatchObject({status: 'False', reason: 'PodCompleted'})
    expect(cond(done, 'Initialized')).toMatchObject({status: 'True', reason: 'PodCompleted'})
  })

  test('past its active deadline with its container still running: phase and reason held, Ready and ContainersReady False with PodFailed', () => {
    const previous = build(pod(), {reported: {containerStatuses: [running('app')]}, sandboxReady: true})
    const reported = {phase: 'Failed', reason: 'DeadlineExceeded', message: 'Pod was active on the node longer than the specified deadline', containerStatuses: [running('app')]}
    const stopping = build(pod(), {reported, previous, sandboxReady: true, couldHaveRunningContainers: true, now: t1})
    expect(stopping.phase).toBe('Running')
    expect(stopping.reason).toBeUndefined()
    expect(stopping.containerStatuses![0].state!.running).toBeDefined()
    expect(cond(stopping, 'Ready')).toMatchObject({status: 'False', reason: 'PodFailed'})
    expect(cond(stopping, 'ContainersReady')).toMatchObject({status: 'False', reason: 'PodFailed'})
    const failed = build(pod(), {reported: {...reported, containerStatuses: [exited('app', 137)]}, previous: stopping, couldHaveRunningContainers: false, podIsTerminal: true, now: t1})
    expect(failed).toMatchObject({phase: 'Failed', reason: 'DeadlineExceeded'})
    expect(cond(failed, 'Ready')).toMatchObject({status: 'False', reason: 'PodFailed'})
  })

  test('a terminated pod whose containers were lost: ContainerStatusUnknown exit 137 and Failed', () => {
    const s = build(pod(), {reported: {containerStatuses: [running('app')]}, podIsTerminal: true, couldHaveRunningContainers: false})
    expect(s.phase).toBe('Failed')
    expect(s.containerStatuses![0].state!.terminated).toMatchObject({exitCode: 137, reason: 'ContainerStatusUnknown', message: 'The container could not be located when the pod was terminated'})
    expect(cond(s, 'ContainersReady')).toMatchObject({status: 'False', reason: 'PodFailed'})
  })

  test('a provider holding the sandbox back (volumes not mounted): PodReadyToStartContainers False and no IP, to the end', () => {
    const held = {type: 'PodReadyToStartContainers', status: 'False', reason: 'WaitingForVolumes'}
    const waiting = build(pod(), {reported: {conditions: [held]}, sandboxReady: true, hadSandbox: true})
    expect(cond(waiting, 'PodReadyToStartContainers')!.status).toBe('False')
    expect(waiting.podIP).toBeUndefined()
    const ended = build(pod(), {reported: {conditions: [held]}, hadSandbox: true, podIsTerminal: true, couldHaveRunningContainers: false})
    expect(ended.podIP).toBeUndefined()
    const mounted = build(pod(), {reported: {}, sandboxReady: true, hadSandbox: true})
    expect(cond(mounted, 'PodReadyToStartContainers')!.status).toBe('True')
    expect(mounted.podIP).toBe('10.1.2.3')
  })

  test('a pod that ended before any status was written while its sandbox was ready still reports the sandbox IP', () => {
    const s = build(pod({restartPolicy: 'Never'}), {reported: {containerStatuses: [exited('app', 1)]}, hadSandbox: true, podIsTerminal: true, couldHaveRunningContainers: false})
    expect(s.phase).toBe('Failed')
    expect(cond(s, 'PodReadyToStartContainers')!.status).toBe('False')
    expect(s.podIP).toBe('10.1.2.3')
  })

  test('a terminated pod whose container never started: Failed, but its conditions are those of the Pending pod it was (TerminatePod leaves them)', () => {
    const waiting: V1ContainerStatus = {
      name: 'app',
      image: 'img',
      imageID: '',
      ready: false,
      started: false,
      restartCount: 0,
      state: {waiting: {reason: 'CreateContainerConfigError', message: 'configmap "x" not found'}},
    }
    const s = build(pod(), {reported: {containerStatuses: [waiting]}, podIsTerminal: true, couldHaveRunningContainers: false})
    expect(s.phase).toBe('Failed')
    expect(s.containerStatuses![0].state!.terminated).toMatchObject({exitCode: 137, reason: 'ContainerStatusUnknown'})
    expect(cond(s, 'ContainersReady')).toMatchObject({status: 'False', reason: 'ContainersNotReady', message: 'containers with unready status: [app]'})
    expect(cond(s, 'Ready')).toMatchObject({status: 'False', reason: 'ContainersNotReady'})
  })

  test('a deleted restartPolicy Always pod whose processes exited 0 on SIGTERM is Succeeded; 143 makes it Failed', () => {
    expect(build(pod(), {reported: {containerStatuses: [exited('app', 0)]}, podIsTerminal: true, couldHaveRunningContainers: false}).phase).toBe('Succeeded')
    expect(build(pod(), {reported: {containerStatuses: [exited('app', 143)]}, podIsTerminal: true, couldHaveRunningContainers: false}).phase).toBe('Failed')
  })

  test('never out of a terminal phase: an API phase of Failed stays Failed with its reason', () => {
    const p = pod({}, {phase: 'Failed', reason: 'OutOfcpu', message: 'Pod was rejected: x'})
    const s = build(p, {reported: {containerStatuses: [running('app')]}, sandboxReady: true})
    expect(s.phase).toBe('Failed')
    expect(s.reason).toBe('OutOfcpu')
  })

  test('an admission rejection: Failed with the reason and message, no container statuses', () => {
    const s = build(pod(), {
      podIsTerminal: true,
      couldHaveRunningContainers: false,
      override: {phase: 'Failed', reason: 'OutOfcpu', message: 'Pod was rejected: too much', noContainers: true},
    })
    expect(s).toMatchObject({phase: 'Failed', reason: 'OutOfcpu', message: 'Pod was rejected: too much'})
    expect(s.containerStatuses).toBeUndefined()
    expect(s.podIP).toBeUndefined()
    expect(cond(s, 'Ready')).toMatchObject({status: 'False', reason: 'PodFailed'})
  })

  test('observedGeneration: the pod generation on the status and on every condition, never going back', () => {
    const p = pod()
    p.metadata!.generation = 3
    const s = build(p)
    expect(s.observedGeneration).toBe(3)
    expect(s.conditions!.map((c) => [c.type, c.observedGeneration])).toEqual([
      ['PodReadyToStartContainers', 3],
      ['Initialized', 3],
      ['Ready', 3],
      ['ContainersReady', 3],
      ['PodScheduled', 3],
    ])
    expect(build(p, {previous: {...s, observedGeneration: 5}}).observedGeneration).toBe(5)
    expect(build(pod()).observedGeneration).toBeUndefined()
    // A graceful delete bumps the generation, and the status follows it, as the kubelet's does.
    const deleting = pod()
    deleting.metadata = {...deleting.metadata, generation: 4, deletionTimestamp: t1}
    const d = build(deleting, {previous: s})
    expect(d.observedGeneration).toBe(4)
    expect(d.conditions!.every((c) => c.observedGeneration === 4)).toBe(true)
  })

  test('every container reports its volume mounts; one the runtime knows also its resources and allocated requests', () => {
    const resources = {requests: {cpu: '50m', memory: '16Mi'}, limits: {memory: '32Mi'}}
    const volumeMounts = [
      {name: 'data', mountPath: '/data'},
      {name: 'token', mountPath: '/var/run/secrets/t', readOnly: true},
    ]
    const p = pod({
      containers: [
        {name: 'app', image: 'img', resources, volumeMounts},
        {name: 'plain', image: 'img'},
        {name: 'waiting', image: 'img', volumeMounts},
      ],
    })
    const waiting: V1ContainerStatus = {name: 'waiting', image: 'img', imageID: '', ready: false, restartCount: 0, state: {waiting: {reason: 'CreateContainerConfigError'}}}
    const s = build(p, {reported: {containerStatuses: [running('app'), running('plain'), waiting]}, sandboxReady: true})
    const app = s.containerStatuses!.find((c) => c.name === 'app')!
    expect(app.resources).toEqual(resources)
    expect(app.allocatedResources).toEqual(resources.requests)
    expect(app.volumeMounts).toEqual([
      {name: 'data', mountPath: '/data'},
      {name: 'token', mountPath: '/var/run/secrets/t', readOnly: true, recursiveReadOnly: 'Disabled'},
    ])
    const plain = s.containerStatuses!.find((c) => c.name === 'plain')!
    expect(plain.resources).toEqual({})
    expect(plain).not.toHaveProperty('allocatedResources')
    expect(plain).not.toHaveProperty('volumeMounts')
    const w = s.containerStatuses!.find((c) => c.name === 'waiting')!
    expect(w.volumeMounts).toEqual(app.volumeMounts)
    expect(w).not.toHaveProperty('resources')
    // Nothing reported yet: the default waiting status carries the mounts too.
    const fresh = build(p).containerStatuses!.find((c) => c.name === 'app')!
    expect(fresh.volumeMounts).toEqual(app.volumeMounts)
    expect(fresh).not.toHaveProperty('resources')
  })

  test('readiness gates: Ready waits for the gate condition', () => {
    const p = pod({readinessGates: [{conditionType: 'example.com/gate'}]})
    const s = build(p, {reported: {containerStatuses: [running('app')]}, sandboxReady: true})
    expect(cond(s, 'ContainersReady')!.status).toBe('True')
    expect(cond(s, 'Ready')).toMatchObject({status: 'False', reason: 'ReadinessGatesNotReady', message: 'corresponding condition of pod readiness gate "example.com/gate" does not exist.'})
  })
})

describe('getPhase', () => {
  const p = (policy: string, init = false) => pod({restartPolicy: policy, ...(init ? {initContainers: [{name: 'i', image: 'img'}]} : {})})
  test.each([
    ['Always', 'exited 1', [exited('app', 1)], 'Running'],
    ['OnFailure', 'exited 1', [exited('app', 1)], 'Running'],
    ['OnFailure', 'exited 0', [exited('app', 0)], 'Succeeded'],
    ['Never', 'exited 1', [exited('app', 1)], 'Failed'],
    ['Never', 'running', [running('app')], 'Running'],
  ])('restartPolicy %s, container %s', (policy, _what, statuses, phase) => {
    expect(getPhase(p(policy as string), [], statuses as V1ContainerStatus[], false)).toBe(phase)
  })

  test('a running sidecar keeps a finished pod Running (it counts as running); stopped, it has no say', () => {
    const job = pod({restartPolicy: 'Never', initContainers: [{name: 'side', image: 'img', restartPolicy: 'Always'}]})
    expect(getPhase(job, [running('side')], [exited('app', 0)], false)).toBe('Running')
    expect(getPhase(job, [exited('side', 0)], [exited('app', 0)], false)).toBe('Succeeded')
    expect(getPhase(job, [exited('side', 143)], [exited('app', 0)], false)).toBe('Succeeded')
    // Not yet started: Pending until a regular container has run; a sidecar missing from the report is unknown.
    expect(getPhase(job, [{...running('side'), started: false}], [], false)).toBe('Pending')
    expect(getPhase(job, [], [running('app')], false)).toBe('Pending')
  })

  test('a failed init container with restartPolicy Never fails the pod', () => {
    expect(getPhase(p('Never', true), [exited('i', 1)], [{name: 'app', image: 'img', imageID: '', ready: false, restartCount: 0, state: {waiting: {reason: 'PodInitializing'}}}], false)).toBe('Failed')
  })
})
