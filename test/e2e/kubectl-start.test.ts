import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, processesMatching, stopAllVnodes, uniqueName} from './helpers.js'

/** A clean start as kubectl shows it, and what it costs in status writes. */
describeE2e('kubectl: create to Running', () => {
  const f = new KubectlFixture('kstart')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('a clean start: READY 1/1 Running, podIP = hostIP = the node InternalIP, kubelet conditions, one status write', async () => {
    const marker = uniqueName('start')
    await f.create({
      metadata: {name: 'web'},
      spec: {terminationGracePeriodSeconds: 5, containers: [markedContainer('app', 'setInterval(() => {}, 1000)', marker)]},
    })
    const row = await f.waitRow('web', (r) => r.status === 'Running', 'Running')
    expect(row).toMatchObject({ready: '1/1', status: 'Running', restarts: 0})

    const nodeIP = (await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}'])).stdout
    expect(nodeIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
    expect(await f.jsonpath('web', '{.status.podIP} {.status.hostIP} {.status.podIPs[0].ip} {.status.hostIPs[0].ip}')).toBe(`${nodeIP} ${nodeIP} ${nodeIP} ${nodeIP}`)
    const conditions = await f.jsonpath('web', '{range .status.conditions[*]}{.type}={.status};{end}')
    for (const t of ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled']) expect(conditions).toContain(`${t}=True;`)
    expect(await f.jsonpath('web', '{.status.phase} {.status.containerStatuses[0].started} {.status.containerStatuses[0].ready} {.status.containerStatuses[0].image}')).toBe('Running true true node')
    expect(await f.jsonpath('web', '{.status.startTime}')).not.toBe('')
    expect(await f.jsonpath('web', '{.status.containerStatuses[0].containerID}')).toMatch(/^vnode:\/\/[0-9a-f]{64}$/)
    const described = await f.waitDescribe('web', /Started\s+.*Started container app/)
    expect(described).toMatch(/Normal\s+Pulled\s+.*Container image "node" already present on machine/)
    expect(described).toMatch(/Normal\s+Created\s+.*Created container: app/)

    const wide = await kubectl(['get', 'pod', 'web', '-n', f.ns, '-o', 'wide', '--no-headers'])
    expect(wide.stdout).toMatch(new RegExp(`^web\\s+1/1\\s+Running\\s+0\\s+\\S+\\s+${nodeIP.replaceAll('.', '\\.')}\\s+${f.nodeName}\\s`))

    const pids = await processesMatching(marker)
    expect(pids).toHaveLength(1)

    // A force delete leaves the pod to the node (no status write of ours) and no process behind.
    const del = await kubectl(['delete', 'pod', 'web', '-n', f.ns, '--grace-period=0', '--force'])
    expect(del.exitCode).toBe(0)
    await f.gone('web')
    await f.noProcess(marker)

    expect(await f.node.stop()).toBe(0)
    const summary = f.summary()
    expect(summary).toBeDefined()
    // Pending -> ContainerCreating -> Running in one PATCH, not three.
    expect(summary!.byResource['PATCH pods/status']).toBe(1)
  })
})
