import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {type AdmissionNode, admitPod} from '../../src/emulator/pods/admission.js'
import {podRequests} from '../../src/emulator/pod-requests.js'

const node: AdmissionNode = {
  name: 'n1',
  labels: {'kubernetes.io/hostname': 'n1', zone: 'a', rank: '5'},
  taints: [{key: 'virtual-kubelet.io/provider', value: 'vnode', effect: 'NoSchedule'}],
  allocatable: {cpu: '2', memory: '1Gi', pods: '3'},
}

let n = 0
function pod(spec: Partial<V1Pod['spec']> = {}, requests?: Record<string, string>): V1Pod {
  n++
  return {
    metadata: {name: `p${n}`, namespace: 'ns', uid: `u${n}`},
    spec: {nodeName: 'n1', containers: [{name: 'c', image: 'i', ...(requests ? {resources: {requests}} : {})}], ...spec},
  }
}

describe('kubelet admission', () => {
  test('a pod that fits is admitted', () => {
    expect(admitPod(pod({}, {cpu: '500m', memory: '100Mi'}), node, [])).toEqual({admit: true})
  })

  test('OutOfcpu with the kubelet message (millicores), counting the pods already admitted', () => {
    const others = [pod({}, {cpu: '1500m'})]
    expect(admitPod(pod({}, {cpu: '1'}), node, others)).toEqual({
      admit: false,
      reason: 'OutOfcpu',
      message: "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000",
    })
  })

  test('OutOfmemory in bytes', () => {
    const r = admitPod(pod({}, {memory: '2Gi'}), node, [])
    expect(r).toEqual({admit: false, reason: 'OutOfmemory', message: `Node didn't have enough resource: memory, requested: ${2 * 2 ** 30}, used: 0, capacity: ${2 ** 30}`})
  })

  test('OutOfpods when the pod count is reached', () => {
    const r = admitPod(pod(), node, [pod(), pod(), pod()])
    expect(r).toMatchObject({admit: false, reason: 'OutOfpods'})
  })

  test('init containers count as the max, sidecars add up', () => {
    const p = pod(
      {
        initContainers: [
          {name: 'i', image: 'i', resources: {requests: {cpu: '3'}}},
          {name: 's', image: 'i', restartPolicy: 'Always', resources: {requests: {cpu: '100m'}}},
        ],
      },
      {cpu: '200m'},
    )
    expect(podRequests(p).cpu).toBe(3000)
  })

  test('node selector and required node affinity', () => {
    expect(admitPod(pod({nodeSelector: {zone: 'b'}}), node, [])).toEqual({
      admit: false,
      reason: 'NodeAffinity',
      message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    })
    const affinity = (operator: string, values?: string[], key = 'zone') => ({
      nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key, operator, values}]}]}},
    })
    expect(admitPod(pod({affinity: affinity('In', ['a', 'c'])}), node, []).admit).toBe(true)
    expect(admitPod(pod({affinity: affinity('NotIn', ['a'])}), node, []).admit).toBe(false)
    expect(admitPod(pod({affinity: affinity('Gt', ['4'], 'rank')}), node, []).admit).toBe(true)
    expect(admitPod(pod({affinity: affinity('DoesNotExist', undefined, 'gpu')}), node, []).admit).toBe(true)
  })

  test("NoExecute taints must be tolerated; NoSchedule ones are the scheduler's business", () => {
    const tainted = {...node, taints: [...node.taints, {key: 'dedicated', value: 'x', effect: 'NoExecute'}]}
    expect(admitPod(pod(), node, []).admit).toBe(true)
    expect(admitPod(pod(), tainted, [])).toEqual({
      admit: false,
      reason: 'TaintToleration',
      message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
    })
    expect(admitPod(pod({tolerations: [{key: 'dedicated', operator: 'Equal', value: 'x', effect: 'NoExecute'}]}), tainted, []).admit).toBe(true)
    expect(admitPod(pod({tolerations: [{operator: 'Exists'}]}), tainted, []).admit).toBe(true)
    expect(admitPod(pod({tolerations: [{key: 'dedicated', operator: 'Equal', value: 'y'}]}), tainted, []).admit).toBe(false)
  })

  test('host ports already taken on the node', () => {
    const withPort = () => pod({containers: [{name: 'c', image: 'i', ports: [{containerPort: 80, hostPort: 8080}]}]})
    expect(admitPod(withPort(), node, [withPort()])).toMatchObject({admit: false, reason: 'NodePorts'})
  })

  test('resources are checked first: only the first failure is reported', () => {
    expect(admitPod(pod({nodeSelector: {zone: 'b'}}, {cpu: '8'}), node, [])).toMatchObject({reason: 'OutOfcpu'})
  })
})
