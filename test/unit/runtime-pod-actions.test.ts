import {describe, expect, test} from '@jest/globals'
import type {V1Container, V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {DefaultCrashLoopTiming} from '../../src/emulator/runtime/container/crash-loop.js'
import {ContainerState, type ContainerKind} from '../../src/emulator/runtime/container/state.js'
import {computePodActions, podCompleted, startGate, type ObservedPod, type PodActions} from '../../src/emulator/runtime/pod/pod-actions.js'
import type {ContainerProcess} from '../../src/emulator/runtime/process/container-process.js'
import {FakeClock} from './fake-clock.js'

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0)
const noStatus = {} as V1ContainerStatus

function pod(spec: Partial<NonNullable<V1Pod['spec']>> = {}, status: V1Pod['status'] = {}): V1Pod {
  return {metadata: {name: 'p', namespace: 'ns', uid: 'u1'}, spec: {containers: [{name: 'app'}], ...spec}, status}
}

function states(p: V1Pod, clock = new FakeClock(T0)): ContainerState[] {
  const kind = (c: V1Container): ContainerKind => (c.restartPolicy === 'Always' ? 'sidecar' : 'init')
  return [
    ...(p.spec!.initContainers ?? []).map((c) => new ContainerState(c, kind(c), DefaultCrashLoopTiming, clock)),
    ...p.spec!.containers.map((c) => new ContainerState(c, 'regular', DefaultCrashLoopTiming, clock)),
  ]
}

function observed(containers: ContainerState[], over: Partial<ObservedPod> = {}): ObservedPod {
  return {containers, initDone: false, finished: false, terminating: false, createdAt: T0, ...over}
}

/** A container's instance starts (and, with exitCode, ends at `at`). */
function run(c: ContainerState, exitCode?: number, at = T0): void {
  c.created({containerID: `vnode://${c.name}-${c.instances}`, imageID: '', logPath: '/dev/null', terminationFile: '/dev/null'})
  c.run({} as ContainerProcess, noStatus)
  if (exitCode !== undefined) c.exited({exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt: new Date(at), finishedAt: new Date(at)}, exitCode)
}

const starts = (a: PodActions) => a.containers.filter((s) => s.action === 'start').map((s) => s.container.name)

describe('computePodActions: init containers', () => {
  const p = pod({initContainers: [{name: 'one'}, {name: 'two'}], containers: [{name: 'app'}]})

  test('they run one at a time, in order, each after the last exited 0; then the containers', () => {
    const cs = states(p)
    let a = computePodActions(p, observed(cs), T0)
    expect(a.init).toEqual({action: 'start', container: cs[0]})
    expect(starts(a)).toEqual([])
    run(cs[0])
    expect(computePodActions(p, observed(cs), T0).init).toEqual({action: 'wait', container: cs[0]})
    cs[0].exited({exitCode: 0, reason: 'Completed', finishedAt: new Date(T0)}, 0)
    expect(computePodActions(p, observed(cs), T0).init).toEqual({action: 'start', container: cs[1]})
    run(cs[1], 0)
    a = computePodActions(p, observed(cs), T0)
    expect(a.init).toEqual({action: 'done'})
    expect(starts(a)).toEqual(['app'])
  })

  test('a failed one is restarted, unless restartPolicy is Never: then the pod fails', () => {
    for (const [policy, action] of [
      ['Always', 'start'],
      ['OnFailure', 'start'],
      ['Never', 'fail'],
    ] as const) {
      const q = {...p, spec: {...p.spec!, restartPolicy: policy}}
      const cs = states(q)
      run(cs[0], 1)
      expect([policy, computePodActions(q, observed(cs), T0).init]).toEqual([policy, {action, container: cs[0]}])
    }
  })

  test('once done they are not run again, whatever their state', () => {
    const cs = states(p)
    const a = computePodActions(p, observed(cs, {initDone: true}), T0)
    expect(a.init).toEqual({action: 'done'})
    expect(starts(a)).toEqual(['app'])
  })
})

describe('computePodActions: sidecars', () => {
  const p = pod({initContainers: [{name: 'proxy', restartPolicy: 'Always'}, {name: 'setup'}], containers: [{name: 'app'}]})

  test('a sidecar starts in its place; the next init container waits until it has started', () => {
    const cs = states(p)
    expect(computePodActions(p, observed(cs), T0).init).toEqual({action: 'start', container: cs[0]})
    run(cs[0])
    expect(computePodActions(p, observed(cs), T0).init).toEqual({action: 'start', container: cs[1]})
  })

  test('a sidecar with a startup probe that has not passed holds the init containers', () => {
    const q = pod({initContainers: [{name: 'proxy', restartPolicy: 'Always', startupProbe: {exec: {command: ['true']}}}, {name: 'setup'}]})
    const cs = states(q)
    run(cs[0])
    expect(computePodActions(q, observed(cs), T0).init).toEqual({action: 'wait', container: cs[0]})
    cs[0].probed({started: true, ready: true})
    expect(computePodActions(q, observed(cs), T0).init).toEqual({action: 'start', container: cs[1]})
  })

  test('after the init containers, a sidecar that exited is started again, under any restartPolicy', () => {
    const q = {...p, spec: {...p.spec!, restartPolicy: 'Never'}}
    const cs = states(q)
    run(cs[0], 1)
    run(cs[1], 0)
    run(cs[2])
    expect(starts(computePodActions(q, observed(cs, {initDone: true}), T0))).toEqual(['proxy'])
  })
})

describe('computePodActions: restart policies', () => {
  const cases: Array<[string, number, 'start' | 'settle']> = [
    ['Always', 0, 'start'],
    ['Always', 1, 'start'],
    ['OnFailure', 0, 'settle'],
    ['OnFailure', 2, 'start'],
    ['Never', 0, 'settle'],
    ['Never', 1, 'settle'],
  ]
  test.each(cases)('restartPolicy %s, exit code %i: %s', (policy, exitCode, action) => {
    const p = pod({restartPolicy: policy})
    const cs = states(p)
    run(cs[0], exitCode)
    const a = computePodActions(p, observed(cs, {initDone: true}), T0)
    expect(a.containers).toEqual([{action, container: cs[0]}])
    expect(podCompleted(p, observed(cs, {initDone: true}))).toBe(action === 'settle')
  })

  test('a changed spec restarts a container restartPolicy Never would leave down', () => {
    const p = pod({restartPolicy: 'Never'})
    const cs = states(p)
    run(cs[0], 0)
    cs[0].restartSoon()
    expect(starts(computePodActions(p, observed(cs, {initDone: true}), T0))).toEqual(['app'])
  })

  test('a running container is neither started nor settled, and the pod is not completed', () => {
    const p = pod()
    const cs = states(p)
    run(cs[0])
    expect(computePodActions(p, observed(cs, {initDone: true}), T0).containers).toEqual([])
    expect(podCompleted(p, observed(cs, {initDone: true}))).toBe(false)
  })
})

describe('computePodActions: a pod that ends', () => {
  test('terminating or finished, nothing starts or restarts', () => {
    const p = pod({initContainers: [{name: 'one'}]})
    const cs = states(p)
    for (const over of [{finished: true}, {finished: true, terminating: true}]) {
      const a = computePodActions(p, observed(cs, over), T0)
      expect(a.init).toEqual({action: 'done'})
      expect(a.containers).toEqual([])
    }
  })

  test('activeDeadlineSeconds counts from status.startTime (else from when the runtime took the pod) and ends everything', () => {
    const start = T0 - 5_000
    const p = pod({activeDeadlineSeconds: 30}, {startTime: new Date(start)})
    const cs = states(p)
    const before = computePodActions(p, observed(cs), start + 29_999)
    expect(before).toMatchObject({activeDeadlineAt: start + 30_000, deadlineExceeded: false, init: {action: 'done'}})
    expect(starts(before)).toEqual(['app'])
    const after = computePodActions(p, observed(cs), start + 30_000)
    expect(after).toMatchObject({deadlineExceeded: true, containers: []})
    expect(computePodActions(pod({activeDeadlineSeconds: 10}), observed(cs), T0 + 10_000).deadlineExceeded).toBe(true)
    expect(computePodActions(pod(), observed(cs), T0 + 1e12).activeDeadlineAt).toBe(Infinity)
  })
})

describe('startGate: the crash-loop back-off and the config retry, at start time', () => {
  test('the first restart is at once, then 10 s, 20 s after each exit, and the wait shrinks as time passes', () => {
    const p = pod()
    const [c] = states(p)
    run(c, 1, T0)
    expect(startGate(c, T0, 0)).toEqual({gate: 'start', backOffFrom: T0})
    c.backoff.restarted(T0, T0)
    run(c, 1, T0 + 1_000)
    expect(startGate(c, T0 + 1_000, 0)).toEqual({gate: 'backOff', waitMs: 10_000})
    expect(startGate(c, T0 + 4_000, 0)).toEqual({gate: 'backOff', waitMs: 7_000})
    expect(c.backoff.currentMs).toBe(10_000)
    expect(startGate(c, T0 + 11_000, 0)).toEqual({gate: 'start', backOffFrom: T0 + 1_000})
    c.backoff.restarted(T0 + 1_000, T0 + 11_000)
    run(c, 1, T0 + 12_000)
    expect(startGate(c, T0 + 12_000, 0)).toEqual({gate: 'backOff', waitMs: 20_000})
  })

  test('a container that never ran, or restarts for a changed spec, does not back off', () => {
    const [c] = states(pod())
    expect(startGate(c, T0, 0)).toEqual({gate: 'start'})
    run(c, 1)
    c.backoff.restarted(T0, T0)
    run(c, 1)
    c.restartSoon()
    expect(startGate(c, T0, 0)).toEqual({gate: 'start'})
  })

  test('a config that failed waits for the retry and then is tried again without back-off', () => {
    const [c] = states(pod())
    run(c, 1)
    c.backoff.restarted(T0, T0)
    run(c, 1)
    c.waitWith({reason: 'CreateContainerConfigError', message: 'configmap "x" not found'})
    expect(startGate(c, T0, T0 + 1_000)).toEqual({gate: 'retry', at: T0 + 1_000})
    expect(startGate(c, T0 + 1_000, T0 + 1_000)).toEqual({gate: 'start'})
  })

  test("a container its probe kills restarts as the kubelet's killing sync judges it: from the exit before the kill", () => {
    // The kubelet's liveness-exec-fail timeline: kills at 9.5 s, 17.5 s, 25.5 s and 47.5 s after the first start.
    const [c] = states(pod())
    const kill = (at: number) => {
      c.killToRestart(noStatus)
      c.exited({exitCode: 137, reason: 'Error', finishedAt: new Date(at)}, 137)
    }
    const start = (at: number) => {
      const gate = startGate(c, at, 0)
      // As the sync does: a back-off is said (the judgement is made), a start creates the next instance.
      if (gate.gate === 'backOff') c.waitWith({reason: 'CrashLoopBackOff'})
      if (gate.gate === 'start' && gate.backOffFrom !== undefined) c.backoff.restarted(gate.backOffFrom, at)
      if (gate.gate === 'start') run(c)
      return gate
    }
    run(c)
    kill(T0 + 9_500)
    // No instance ended before: it restarts, and the back-off does not count it.
    expect(start(T0 + 9_500)).toEqual({gate: 'start'})
    expect(c.backoff.currentMs).toBe(0)
    kill(T0 + 17_500)
    // Out of the back-off of the one before (none yet): it restarts, and the back-off starts counting.
    expect(start(T0 + 17_500)).toEqual({gate: 'start', backOffFrom: T0 + 9_500})
    expect(c.backoff.currentMs).toBe(10_000)
    kill(T0 + 25_500)
    // 8 s after the one before, within its 10 s: it waits 10 s from its own exit.
    expect(start(T0 + 25_500)).toEqual({gate: 'backOff', waitMs: 10_000})
    expect(c.killedToRestart).toBe(false)
    // Judged once: a later sync still in that wait does not fall back to the exit before.
    expect(start(T0 + 28_000)).toEqual({gate: 'backOff', waitMs: 7_500})
    expect(start(T0 + 35_500)).toEqual({gate: 'start', backOffFrom: T0 + 25_500})
    expect(c.backoff.currentMs).toBe(20_000)
    kill(T0 + 47_500)
    // 22 s after the one before, past its 20 s: at once again.
    expect(start(T0 + 47_500)).toEqual({gate: 'start', backOffFrom: T0 + 25_500})
    expect(c.backoff.currentMs).toBe(40_000)
  })

  test('a container its probe kills shows its status of before the kill until it is created again, or waits', () => {
    const [c] = states(pod())
    run(c)
    c.seenAt(T0, noStatus)
    const before = c.status('ContainerCreating', T0)
    expect(before.state).toHaveProperty('running')
    c.killToRestart(before)
    c.exited({exitCode: 137, reason: 'Error', finishedAt: new Date(T0 + 1_000)}, 137)
    expect(c.status('ContainerCreating', T0 + 1_000)).toEqual(before)
    c.created({containerID: 'vnode://app-1', imageID: '', logPath: '/dev/null', terminationFile: '/dev/null'})
    // Its own status again (until the start is seen, the start shows what this shows).
    expect(c.status('ContainerCreating', T0 + 1_000).state?.terminated?.exitCode).toBe(137)
    // In back-off instead: it waits, and says so.
    run(c)
    c.seenAt(T0, noStatus)
    c.killToRestart(c.status('ContainerCreating', T0 + 2_000))
    c.exited({exitCode: 137, reason: 'Error', finishedAt: new Date(T0 + 2_000)}, 137)
    c.waitWith({reason: 'CrashLoopBackOff', message: 'back-off 10s restarting failed container=app pod=p_ns(u1)'})
    expect(c.status('ContainerCreating', T0 + 2_000).state?.waiting?.reason).toBe('CrashLoopBackOff')
  })

  test('a start the runtime refused waits for the retry, then backs off like a crash', () => {
    const [c] = states(pod())
    run(c, 1)
    c.backoff.restarted(T0, T0)
    c.created({containerID: 'vnode://x', imageID: '', logPath: '/dev/null', terminationFile: '/dev/null'})
    c.startFailed({exitCode: 128, reason: 'StartError', finishedAt: new Date(T0 + 500)}, 'exec: "nope": executable file not found in $PATH')
    expect(startGate(c, T0 + 600, T0 + 1_000)).toEqual({gate: 'retry', at: T0 + 1_000})
    expect(startGate(c, T0 + 1_000, T0 + 1_000)).toEqual({gate: 'backOff', waitMs: 9_500})
  })
})

describe('ContainerState at the pod termination and the container GC', () => {
  test('a container the termination stopped keeps the instance before as lastState until the GC; one that had ended before keeps its newest only', () => {
    const [c] = states(pod())
    run(c, 137, T0)
    c.backoff.restarted(T0, T0)
    run(c, 137, T0 + 2_000)
    const ended = states(pod())[0]
    run(ended, 137, T0)
    run(ended, 137, T0 + 2_000)
    ended.podTerminated({endedBefore: true})
    expect(ended.status('ContainerCreating', T0 + 3_000).state?.terminated?.finishedAt).toEqual(new Date(T0 + 2_000))
    expect(ended.status('ContainerCreating', T0 + 3_000).lastState).toEqual({})
    c.podTerminated({endedBefore: false})
    const s = c.status('ContainerCreating', T0 + 3_000)
    expect(s.state).toEqual({terminated: expect.objectContaining({exitCode: 137, finishedAt: new Date(T0 + 2_000)})})
    expect(s.lastState).toEqual({terminated: expect.objectContaining({exitCode: 137, finishedAt: new Date(T0)})})
    c.collectDead()
    expect(c.status('ContainerCreating', T0 + 3_000).lastState).toEqual({})
  })
})
