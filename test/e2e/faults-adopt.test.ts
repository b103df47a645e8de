import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {clients, createNamespace, deleteNamespace, describeE2e, kubectl, processesMatching, runDir, serverPort, startVnode, stopAllVnodes, type Clients, uniqueName, waitFor} from './helpers.js'
import {containerStatus, createPod, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'
import {readPodRecord} from '../../src/emulator/runtime/pod/record.js'
import {DefaultSpareFifos, SparePipesDir} from '../../src/emulator/runtime/process/fifo.js'

/** A container that exits 1 the first time (so it has a restart), then serves a port and logs a numbered line every 100 ms. */
function crashOnceThenServe(marker: string, flag: string, port: number): string {
  return `/*${marker}*/const fs=require('fs');if(!fs.existsSync(${JSON.stringify(flag)})){fs.writeFileSync(${JSON.stringify(flag)},'');process.exit(1)}
require('net').createServer((s)=>s.end()).listen(${port},'127.0.0.1');let i=0;setInterval(()=>console.log('line '+(i++)),100)`
}

const lineNumbers = (text: string) => [...text.matchAll(/^line (\d+)$/gm)].map((m) => Number(m[1]))

describeE2e('restart and adoption: vnode killed with SIGKILL, then up again', () => {
  let c: Clients
  const ns = uniqueName('adopt')
  const node = uniqueName('adopt')
  const tag = uniqueName('adoptmark')
  const flags = join(runDir(), tag)
  const mark = (pod: string) => `${tag}-${pod}`

  beforeAll(async () => {
    c = await clients()
    mkdirSync(flags, {recursive: true})
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c.core, ns)
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('running processes are adopted (same pids, restartCount, status, probes, logs); lost ones restarted; deleted pods killed; a normal exit leaves nothing', async () => {
    const port = await serverPort()
    const first = startVnode(node, ['--no-default-taint'])
    await first.ready()
    const keep = podOn(node, ns, 'keep', [nodeContainer('app', crashOnceThenServe(mark('keep'), join(flags, 'keep'), port), {readinessProbe: {tcpSocket: {port}, periodSeconds: 1}})])
    const lost = podOn(node, ns, 'lost', [nodeContainer('app', `/*${mark('lost')}*/setInterval(()=>{},1000)`)])
    const gone = podOn(node, ns, 'gone', [nodeContainer('app', `/*${mark('gone')}*/setInterval(()=>{},1000)`)])
    const done = podOn(node, ns, 'done', [nodeContainer('app', `/*${mark('done')}*/process.exit(3)`)], {restartPolicy: 'Never'})
    for (const p of [keep, lost, gone, done]) await createPod(c.core, p)

    const before = await waitPod(c.core, ns, 'keep', (p) => containerStatus(p, 'app')?.ready === true && containerStatus(p, 'app')?.restartCount === 1, 'ready after one restart')
    await waitPod(c.core, ns, 'lost', (p) => !!containerStatus(p, 'app')?.state?.running, 'running')
    const goneBefore = await waitPod(c.core, ns, 'gone', (p) => !!containerStatus(p, 'app')?.state?.running, 'running')
    await waitPod(c.core, ns, 'done', (p) => p.status?.phase === 'Failed', 'Failed with exit 3')
    const keepPids = await processesMatching(mark('keep'))
    const lostPids = await processesMatching(mark('lost'))
    expect(keepPids).toHaveLength(1)
    expect(lostPids).toHaveLength(1)
    const goneSandbox = join(first.stateDir, 'pods', goneBefore.metadata!.uid!)
    expect(readPodRecord(goneSandbox)).toBeDefined()
    await waitFor(async () => lineNumbers((await kubectl(['logs', '-n', ns, 'keep'])).stdout).length >= 5, 'a few log lines')

    // vnode dies; its pods do not.
    expect(await first.stop('SIGKILL')).not.toBe(0)
    // Its reserve of output pipes made ahead stays behind: the next vnode starts it afresh.
    const spares = join(first.stateDir, SparePipesDir)
    expect(readdirSync(spares).length).toBeGreaterThan(0)
    writeFileSync(join(spares, 'stale'), '')
    expect(await processesMatching(mark('keep'))).toEqual(keepPids)
    // While it is down: one container dies, one pod is deleted from the API.
    // Its main process: in a sandbox, PID 1 of its namespace, whose end ends the rest.
    process.kill(lostPids[0], 'SIGKILL')
    await c.core.deleteNamespacedPod({name: 'gone', namespace: ns, gracePeriodSeconds: 0})
    await waitFor(async () => !(await readPod(c.core, ns, 'gone')), 'gone to leave the API')
    await new Promise((r) => setTimeout(r, 2000))

    const second = startVnode(node, ['--no-default-taint'])
    await second.ready()
    const isSpare = (f: string) => lstatSync(join(spares, f)).isFIFO() && (lstatSync(join(spares, f)).mode & 0o777) === 0o600
    // Made again from nothing (the stale entry gone); topped up only below half, so starts since may have taken some.
    const reserve = () => (existsSync(spares) ? readdirSync(spares) : [])
    await waitFor(
      () => reserve().length >= DefaultSpareFifos / 2 && reserve().every(isSpare),
      () => `a reserve of pipes, nothing else: ${reserve().length} ${reserve().slice(0, 5).join(',')}`,
      30_000,
    )
    expect(reserve().length).toBeLessThanOrEqual(DefaultSpareFifos)
    // The same process, not a new one: restartCount and containerID kept, Ready again through its probe.
    const after = await waitPod(c.core, ns, 'keep', (p) => containerStatus(p, 'app')?.ready === true && p.status?.phase === 'Running', 'ready after adoption')
    const app = containerStatus(after, 'app')!
    expect(app.restartCount).toBe(1)
    expect(app.containerID).toBe(containerStatus(before, 'app')!.containerID)
    expect(new Date(app.state!.running!.startedAt!).getTime()).toBe(new Date(containerStatus(before, 'app')!.state!.running!.startedAt!).getTime())
    expect(await processesMatching(mark('keep'))).toEqual(keepPids)
    expect(second.lines.some((l) => l.kind === 'event' && /Started/.test(l.message) && l.message.includes('/keep'))).toBe(false)

    // Output written while vnode was down waited in the pipe: the numbering has no gap and goes on.
    const logs = await waitFor(
      async () => {
        const n = lineNumbers((await kubectl(['logs', '-n', ns, 'keep'])).stdout)
        return n.length > 60 ? n : undefined
      },
      'log lines after adoption',
      20_000,
    )
    expect(logs[0]).toBe(0)
    expect(logs).toEqual(logs.map((_, i) => i))

    // The container that died meanwhile: its end was not seen, so ContainerStatusUnknown, and restarted (Always).
    const lostAfter = await waitPod(c.core, ns, 'lost', (p) => containerStatus(p, 'app')?.restartCount === 1 && !!containerStatus(p, 'app')?.state?.running, 'restarted once')
    expect(containerStatus(lostAfter, 'app')!.lastState?.terminated).toMatchObject({exitCode: 137, reason: 'ContainerStatusUnknown'})
    const lostNow = await processesMatching(mark('lost'))
    expect(lostNow).toHaveLength(1)
    expect(lostNow[0]).not.toBe(lostPids[0])

    // Deleted from the API while vnode was down: killed and forgotten.
    await waitFor(async () => (await processesMatching(mark('gone'))).length === 0, 'the deleted pod killed', 15_000)
    await waitFor(() => !existsSync(goneSandbox), 'the deleted pod sandbox removed', 15_000)

    // A finished container keeps its recorded exit.
    const doneAfter = await readPod(c.core, ns, 'done')
    expect(doneAfter?.status?.phase).toBe('Failed')
    expect(containerStatus(doneAfter, 'app')!.state?.terminated?.exitCode).toBe(3)

    // A normal exit terminates every pod: nothing of ours is left in the process table, and no spare pipe.
    expect(await second.stop()).toBe(0)
    expect(existsSync(spares)).toBe(false)
    for (const p of ['keep', 'lost', 'gone', 'done']) expect(await processesMatching(mark(p))).toEqual([])
    const record = readPodRecord(join(second.stateDir, 'pods', after.metadata!.uid!))!
    expect(record.containers.every((x) => !x.running)).toBe(true)
  })
})
