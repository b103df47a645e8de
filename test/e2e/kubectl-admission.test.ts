import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, processesMatching, stopAllVnodes, uniqueName} from './helpers.js'

/** The node's admission (the kubelet's checks) as kubectl shows it: a rejected pod is Failed with the reason. */
describeE2e('kubectl: admission', () => {
  const f = new KubectlFixture('kadm')

  beforeAll(async () => {
    await f.setUp(['--cpu', '1'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  const pod = (name: string, cpu: string, marker: string, extra: Record<string, unknown> = {}) => ({
    metadata: {name},
    spec: {terminationGracePeriodSeconds: 2, containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker, {resources: {requests: {cpu}}})], ...extra},
  })

  test('OutOfcpu: STATUS OutOfcpu, phase Failed with the kubelet message, a Warning event, no process; what fits runs and counts as used', async () => {
    const marker = uniqueName('adm')
    await f.create(pod('fits', '500m', marker))
    await f.waitRow('fits', (r) => r.status === 'Running', 'Running')

    await f.create(pod('big', '600m', marker))
    const row = await f.waitRow('big', (r) => r.status === 'OutOfcpu', 'OutOfcpu')
    expect(row).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('big', '{.status.phase}|{.status.reason}|{.status.message}')).toBe(
      "Failed|OutOfcpu|Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000",
    )
    await f.waitDescribe('big', /Warning\s+OutOfcpu\s+.*Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000/)
    // Only the pod that fits has a process.
    expect(await processesMatching(marker)).toHaveLength(1)
    await kubectl(['delete', 'pod', 'fits', 'big', '-n', f.ns])
    await f.gone('big')
    await f.noProcess(marker)
  })

  test('a nodeSelector the node does not match: NodeAffinity', async () => {
    const marker = uniqueName('sel')
    await f.create(pod('elsewhere', '100m', marker, {nodeSelector: {disktype: 'ssd'}}))
    const row = await f.waitRow('elsewhere', (r) => r.status === 'NodeAffinity', 'NodeAffinity')
    expect(row.ready).toBe('0/1')
    expect(await f.jsonpath('elsewhere', '{.status.phase}|{.status.message}')).toBe("Failed|Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
    expect(await processesMatching(marker)).toEqual([])
    await kubectl(['delete', 'pod', 'elsewhere', '-n', f.ns])
    await f.gone('elsewhere')
  })
})
