import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {type Clients, clients, describeE2e, kubectl, processesMatching, runDir, startVnode, stopAllVnodes, uniqueName, waitFor} from './helpers.js'

describeE2e('kubectl vnode up --manifests: static pods as real processes', () => {
  let c: Clients
  const node = uniqueName('static-up')
  const marker = uniqueName('static-marker')
  const dir = join(runDir(), `manifests-${node}`)
  const mirrorName = `ticker-${node}`

  beforeAll(async () => {
    c = await clients()
    mkdirSync(dir, {recursive: true})
    writeFileSync(
      join(dir, 'ticker.yaml'),
      [
        'apiVersion: v1',
        'kind: Pod',
        'metadata: {name: ticker}',
        'spec:',
        '  containers:',
        '  - name: main',
        '    image: node',
        `    command: [node, -e, "console.log('${marker}'); setInterval(() => {}, 1000)"]`,
        '',
      ].join('\n'),
    )
  })
  afterAll(async () => {
    await stopAllVnodes()
    rmSync(dir, {recursive: true, force: true})
  })

  test('a manifest runs as a process with a Running mirror pod; removing the file stops it and deletes the mirror', async () => {
    const p = startVnode(node, ['--manifests', dir])
    await p.ready()
    await waitFor(
      async () => {
        const r = await kubectl(['get', 'pod', mirrorName, '-n', 'default', '--no-headers'])
        return /1\/1\s+Running/.test(r.stdout)
      },
      'the mirror pod Running',
      30_000,
      250,
    )
    const mirror = await c.core.readNamespacedPod({name: mirrorName, namespace: 'default'})
    expect(mirror.metadata?.annotations?.['kubernetes.io/config.mirror']).toBeDefined()
    expect(mirror.metadata?.ownerReferences?.[0]).toMatchObject({kind: 'Node', name: node})
    expect(await processesMatching(marker)).toHaveLength(1)
    const logs = await waitFor(
      async () => {
        const r = await kubectl(['logs', mirrorName, '-n', 'default'])
        return r.stdout.includes(marker) ? r : undefined
      },
      'the static pod logs through the mirror',
      15_000,
      250,
    )
    expect(logs.exitCode).toBe(0)

    rmSync(join(dir, 'ticker.yaml'))
    await waitFor(async () => (await processesMatching(marker)).length === 0, 'the process to stop', 30_000, 250)
    await waitFor(
      async () => {
        try {
          await c.core.readNamespacedPod({name: mirrorName, namespace: 'default'})
          return false
        } catch (error) {
          return (error as {code?: number}).code === 404
        }
      },
      'the mirror to be deleted',
      30_000,
      250,
    )
    expect(await p.stop()).toBe(0)
  })
})
