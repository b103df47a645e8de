import {afterAll, beforeAll, expect} from '@jest/globals'
import * as k8s from '@kubernetes/client-node'
import {existsSync, readdirSync, readFileSync, readlinkSync} from 'node:fs'
import {join} from 'node:path'
import {startComponent, stopComponent} from '../../../src/cluster/controlplane.js'
import {createNamespace, describeHostE2e, kubectl, runDir, startVnode, stopAllVnodes, testWhen, uniqueName, vnode, type VnodeProcess, waitFor} from '../helpers.js'
import {freePort, hasBwrap, python, relayFlags} from '../relay-helpers.js'

/**
 * The relay through outages, on a control plane of this file's own (its API
 * server is stopped and started again): the relay's process killed, and the
 * API server restarted, each leave `kubectl logs` working again within 30 s.
 * As in relay.ts, the relay pod runs on a second vnode node, and the
 * node under test listens on loopback only, so what reaches it came through
 * the relay.
 */

const Recovery = 30_000
const when = testWhen(python && hasBwrap, 'the relay pod runs the host python3 (with asyncio) in a pod sandbox: python3, bwrap and root are needed')

describeHostE2e('up --relay through outages: the relay process killed, the API server restarted', () => {
  const dir = join(runDir(), 'relay-outage-cluster')
  const kubeconfig = join(dir, 'kubeconfig')
  let core: k8s.CoreV1Api
  let host: VnodeProcess
  let node: VnodeProcess
  const hostName = uniqueName('outage-host')
  const name = uniqueName('outage-relayed')
  const ns = uniqueName('outage')
  const relayNs = uniqueName('vnode-system')
  const relayPod = `vnode-relay-${name}`
  const k = (...args: string[]) => kubectl(['--kubeconfig', kubeconfig, '-n', ns, ...args])

  /** `kubectl logs` of the ticking pod, retried until it shows ticks newer than `after`; resolves with the time it took. */
  const logsBack = async (after: number, since: number): Promise<number> => {
    await waitFor(
      async () => {
        const r = await k('logs', 'app', '--tail', '1', '--request-timeout', '5s')
        const tick = Number(/^tick (\d+)$/.exec(r.stdout)?.[1] ?? 0)
        return r.exitCode === 0 && tick > after
      },
      'kubectl logs through the relay again',
      Recovery + 10_000,
      500,
    )
    return Date.now() - since
  }
  const tunnelsDown = () => node.lines.filter((l) => l.step === 'relay' && /tunnels to .* are down/.test(l.message)).length
  const lastTick = async (): Promise<number> => {
    const r = await k('logs', 'app', '--tail', '1')
    expect(r.exitCode).toBe(0)
    return Number(/^tick (\d+)$/.exec(r.stdout)![1])
  }

  /** The relay program's processes on this host (pid, state, kernel wait channel, executable), for a failure's message. */
  const relayProcesses = (): string =>
    readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .flatMap((d) => {
        try {
          const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').replaceAll('\0', ' ')
          if (!cmd.includes('/vnode-relay/relay.py')) return []
          const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
          const wchan = readFileSync(`/proc/${d}/wchan`, 'utf8')
          const exe = (() => {
            try {
              return readlinkSync(`/proc/${d}/exe`)
            } catch (e) {
              return `<${(e as NodeJS.ErrnoException).code}>`
            }
          })()
          return [`${d} ${stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)} ${wchan} ${exe} ${cmd.slice(0, 60)}`]
        } catch {
          return []
        }
      })
      .join('; ')

  beforeAll(async () => {
    // Every test here is when(...), on the same condition: skipped without it, failed under CI.
    if (!python || !hasBwrap) return
    // The default control plane: as root its nodes' pods have a network of their own, the relay pod's too, whose
    // tunnel port listens on its loopback only (port-forward dials it inside the pod's namespace).
    const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0', '--no-services'], {timeout: 120_000})
    expect(up.exitCode).toBe(0)
    const kc = new k8s.KubeConfig()
    kc.loadFromFile(kubeconfig)
    core = kc.makeApiClient(k8s.CoreV1Api)
    await createNamespace(core, ns)
    host = startVnode(hostName, ['--kubeconfig', kubeconfig, '--sandbox', 'namespaces', '--no-default-taint', '--label', `relay-host=${hostName}`])
    await host.ready()
    const [relayPort, tunnelPort] = [await freePort(), await freePort('127.0.0.1')]
    node = startVnode(name, ['--kubeconfig', kubeconfig, ...relayFlags(relayNs, relayPort, tunnelPort, hostName)])
    await node.ready(120_000)
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name: 'app', namespace: ns},
        spec: {
          nodeName: name,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 2,
          containers: [{name: 'app', image: 'vnode/node', command: [process.execPath, '-e', `process.on('SIGTERM',()=>process.exit(0));let i=0;setInterval(()=>console.log('tick '+(++i)),200)`]}],
        },
      },
    })
    await waitFor(async () => (await core.readNamespacedPod({name: 'app', namespace: ns})).status?.containerStatuses?.[0]?.state?.running, 'app running', 30_000)
    await waitFor(async () => (await k('logs', 'app', '--tail', '1')).stdout.startsWith('tick'), 'kubectl logs through the relay', 30_000)
  }, 240_000)

  afterAll(async () => {
    await stopAllVnodes()
    await vnode(['cluster', 'down', '--dir', dir])
  }, 120_000)

  when('the relay process killed: its container restarts, the tunnels reconnect, kubectl logs works within 30 s', async () => {
    // The relay's process, by the pid its node's kubelet API reports for it (this file's relay only).
    const running = (await core.connectGetNodeProxyWithPath({name: hostName, path: 'runningpods/'})) as unknown
    const pods = (typeof running === 'string' ? JSON.parse(running) : running) as {items: k8s.V1Pod[]}
    const relay = pods.items.find((p) => p.metadata?.name === relayPod && p.metadata?.namespace === relayNs)
    const pid = Number(/=(\d+)/.exec(relay?.metadata?.annotations?.['vnode.dev/pids'] ?? '')?.[1])
    expect(pid).toBeGreaterThan(1)
    // A host pid, running the relay program: nothing else is killed.
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('/vnode-relay/relay.py')
    const before = await lastTick()
    const uid = (await core.readNamespacedPod({name: relayPod, namespace: relayNs})).metadata!.uid
    const killedAt = Date.now()
    process.kill(pid, 'SIGKILL')
    let seen: k8s.V1ContainerStatus | undefined
    // What the host node's own kubelet API says of the container, once the restart is late: its runtime's view, not the API's.
    let nodeView = 'not read'
    await waitFor(
      async () => {
        seen = (await core.readNamespacedPod({name: relayPod, namespace: relayNs})).status?.containerStatuses?.[0]
        if ((seen?.restartCount ?? 0) >= 1) return true
        if (Date.now() - killedAt > Recovery / 2) {
          nodeView = await core
            .connectGetNodeProxyWithPath({name: hostName, path: 'pods/'})
            .then((r) => JSON.stringify(((typeof r === 'string' ? JSON.parse(r) : r) as {items: k8s.V1Pod[]}).items.find((p) => p.metadata?.name === relayPod)?.status?.containerStatuses?.[0]))
            .catch((e: Error) => `error: ${e.message}`)
        }
        return false
      },
      () =>
        `the relay container restarted (its processes: ${relayProcesses()}; its node's view: ${nodeView}; its node's exit code: ${host.child.exitCode}, stderr: ${host.stderr.slice(-1500)}; its status: ${JSON.stringify(seen)}; its node said: ${host.lines
          .slice(-30)
          .map((l) => `${l.step ?? l.kind} ${l.message}`)
          .join(' | ')}; the relayed node said: ${node.lines
          .filter((l) => l.step === 'relay')
          .slice(-10)
          .map((l) => l.message)
          .join(' | ')})`,
      Recovery,
      250,
    )
    expect(await logsBack(before, killedAt)).toBeLessThan(Recovery)
    // The same pod, restarted in place: vnode did not need to make it again.
    expect((await core.readNamespacedPod({name: relayPod, namespace: relayNs})).metadata!.uid).toBe(uid)
    // The logs came through the relay's new process: every tunnel to the killed one is gone with it, so the
    // tunnels were made again (each as its own dial failed and came back; the pool says "down" only when
    // three in a row fail, which a fast restart need not reach).
    const after = (await core.connectGetNodeProxyWithPath({name: hostName, path: 'runningpods/'})) as unknown
    const again = ((typeof after === 'string' ? JSON.parse(after) : after) as {items: k8s.V1Pod[]}).items.find((p) => p.metadata?.name === relayPod && p.metadata?.namespace === relayNs)
    const newPid = Number(/=(\d+)/.exec(again?.metadata?.annotations?.['vnode.dev/pids'] ?? '')?.[1])
    expect(newPid).toBeGreaterThan(1)
    expect(newPid).not.toBe(pid)
    expect(existsSync(`/proc/${pid}`)).toBe(false)
  })

  when('the API server restarted: the tunnels reconnect and kubectl logs and exec work within 30 s of its return', async () => {
    const before = await lastTick()
    const downBefore = tunnelsDown()
    await stopComponent(dir, 'kube-apiserver')
    await new Promise((r) => setTimeout(r, 5_000))
    await startComponent(dir, 'kube-apiserver')
    await waitFor(() => core.readNamespace({name: ns}), 'the API server back', 60_000, 200)
    const backAt = Date.now()
    expect(await logsBack(before, backAt)).toBeLessThan(Recovery)
    expect(await k('exec', 'app', '--', 'echo', 'after the restart')).toMatchObject({exitCode: 0, stdout: 'after the restart'})
    // The tunnels did go down with the API server, and came back.
    expect(tunnelsDown()).toBeGreaterThan(downBefore)
    expect(node.child.exitCode).toBeNull()
    expect(await node.stop()).toBe(0)
    await expect(core.readNamespacedPod({name: relayPod, namespace: relayNs})).rejects.toMatchObject({code: 404})
  })
})
