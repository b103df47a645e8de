import {describe, expect, test} from '@jest/globals'
import type {V1Container} from '@kubernetes/client-node'
import {containerProbes, probeEffect, type ProbedContainer} from '../../src/emulator/runtime/probes/effects.js'

const probe = (grace?: number) => ({exec: {command: ['true']}, ...(grace !== undefined ? {terminationGracePeriodSeconds: grace} : {})})
const container = (spec: Partial<V1Container>, extra: Partial<ProbedContainer> = {}): ProbedContainer => ({
  name: 'c',
  kind: 'regular',
  started: true,
  spec: {name: 'c', ...spec},
  ...extra,
})
const running = {terminating: false, restartPolicy: 'Always'}

describe("what a probe verdict does to its container (the kubelet's SyncPod on prober results)", () => {
  test('probes start startup, liveness, readiness; an init container runs none', () => {
    const spec = {readinessProbe: probe(), livenessProbe: probe(), startupProbe: probe()}
    expect(containerProbes(container(spec)).map(([k]) => k)).toEqual(['startup', 'liveness', 'readiness'])
    expect(containerProbes(container({readinessProbe: probe()})).map(([k]) => k)).toEqual(['readiness'])
    expect(containerProbes(container(spec, {kind: 'init'}))).toEqual([])
    expect(containerProbes(container(spec, {kind: 'sidecar'}))).toHaveLength(3)
  })

  test('readiness follows the verdict, but only once the container has started', () => {
    expect(probeEffect(container({}), 'readiness', 'Success', running)).toEqual({effect: 'ready', ready: true})
    expect(probeEffect(container({}), 'readiness', 'Failure', running)).toEqual({effect: 'ready', ready: false})
    expect(probeEffect(container({}, {started: false}), 'readiness', 'Success', running)).toEqual({effect: 'ready', ready: false})
    // A readiness failure never kills, even while the pod terminates.
    expect(probeEffect(container({}), 'readiness', 'Failure', {...running, terminating: true})).toEqual({effect: 'ready', ready: false})
  })

  test('a startup success starts the container: ready at once unless a readiness probe decides', () => {
    expect(probeEffect(container({startupProbe: probe()}, {started: false}), 'startup', 'Success', running)).toEqual({effect: 'started', ready: true})
    expect(probeEffect(container({startupProbe: probe(), readinessProbe: probe()}, {started: false}), 'startup', 'Success', running)).toEqual({effect: 'started', ready: false})
  })

  test("a liveness or startup failure kills the container with the kubelet's message and the probe's grace", () => {
    expect(probeEffect(container({livenessProbe: probe()}), 'liveness', 'Failure', running)).toEqual({
      effect: 'kill',
      message: 'Container c failed liveness probe, will be restarted',
      graceMs: undefined,
      restarts: true,
    })
    expect(probeEffect(container({startupProbe: probe(3)}), 'startup', 'Failure', running)).toEqual({
      effect: 'kill',
      message: 'Container c failed startup probe, will be restarted',
      graceMs: 3000,
      restarts: true,
    })
    expect(probeEffect(container({livenessProbe: probe(0)}), 'liveness', 'Failure', {...running, restartPolicy: 'Never'})).toEqual({
      effect: 'kill',
      message: 'Container c failed liveness probe',
      graceMs: 0,
      restarts: false,
    })
    // A sidecar restarts whatever the pod's policy.
    expect(probeEffect(container({livenessProbe: probe()}, {kind: 'sidecar'}), 'liveness', 'Failure', {...running, restartPolicy: 'Never'})).toMatchObject({
      message: 'Init container c failed liveness probe, will be restarted',
    })
  })

  test('nothing happens on success of liveness, on Unknown, or on a failure while the pod terminates', () => {
    expect(probeEffect(container({livenessProbe: probe()}), 'liveness', 'Success', running)).toEqual({effect: 'none'})
    expect(probeEffect(container({startupProbe: probe()}), 'startup', 'Unknown', running)).toEqual({effect: 'none'})
    expect(probeEffect(container({livenessProbe: probe()}), 'liveness', 'Failure', {...running, terminating: true})).toEqual({effect: 'none'})
  })
})
