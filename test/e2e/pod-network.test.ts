import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {existsSync, readFileSync} from 'node:fs'
import {Resolver} from 'node:dns/promises'
import {join} from 'node:path'
import {freePort} from '../../src/common/ports.js'
import {ServiceRouteInterface} from '../../src/common/service-route.js'
import {primaryAddress} from '../../src/emulator/node/host.js'
import {bridgeName} from '../../src/emulator/runtime/network/config.js'
import {listNetns} from '../../src/emulator/runtime/network/netns.js'
import {NetnsPrefix} from '../../src/emulator/runtime/network/pod-network.js'
import {E2eEnv} from './env.mjs'
import {clients, type Clients, clusterWithServices, createNamespace, deleteNamespace, describeE2e, kubectl, NODE, startVnode, stopAllVnodes, uniqueName, type VnodeProcess, waitFor} from './helpers.js'
import {assertLocalRoute, httpGet, isRoot, links, natRules} from './network-helpers.js'

const ClusterDnsIp = '10.0.0.10'
/** One port every replica listens on inside its own namespace. */
const AppPort = 8080

/** The gRPC health service (h2c), SERVING, for a grpc probe in the pod's namespace. */
const GrpcPort = 8081

const serverScript = (port: number) =>
  `require('http').createServer((q, s) => s.end(require('os').hostname())).listen(${port}); setInterval(() => { let x = 0; for (let i = 0; i < 1e5; i++) x += i }, 200); ` +
  `require('http2').createServer().on('stream', (s) => { s.on('data', () => {}); s.on('end', () => { s.respond({':status': 200, 'content-type': 'application/grpc'}, {waitForTrailers: true}); s.on('wantTrailers', () => s.sendTrailers({'grpc-status': '0'})); s.end(Buffer.from([0, 0, 0, 0, 2, 8, 1])) }) }).listen(${GrpcPort})`

function deployment(name: string, node: string, replicas: number) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {name},
    spec: {
      replicas,
      selector: {matchLabels: {app: name}},
      template: {
        metadata: {labels: {app: name}},
        spec: {
          nodeName: node,
          terminationGracePeriodSeconds: 2,
          containers: [
            {
              name: 'main',
              image: 'node',
              command: [NODE, '-e', serverScript(AppPort)],
              ports: [{containerPort: AppPort}],
              readinessProbe: {httpGet: {path: '/', port: AppPort}, periodSeconds: 1},
              livenessProbe: {tcpSocket: {port: AppPort}, periodSeconds: 2},
              // Nothing listens on it on the host: a success is the probe reaching the pod's own namespace.
              startupProbe: {grpc: {port: GrpcPort}, periodSeconds: 1},
            },
          ],
        },
      },
    },
  }
}

async function ipForward(): Promise<string> {
  return readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim()
}

/**
 * The pod network, as root with the sandbox's namespaces: every pod its own
 * network namespace and address on its node's bridge (CNI bridge,
 * host-local, loopback, portmap), reached from the host, from other pods,
 * through a Service and by DNS name, with probes, port-forward and the pod
 * proxy; and, on the host network, a Warning when a declared port is taken.
 */
describeE2e('pod network: a namespace and an address per pod', () => {
  // A cluster of this file's own, with kube-proxy and CoreDNS, and node CIDRs allocated.
  const f = clusterWithServices('net', ['--sandbox', 'namespaces', '--pod-network', 'on'])
  const nodeName = f.node
  const ns = f.ns
  let c: Clients
  let node: VnodeProcess
  const bridge = bridgeName(nodeName)
  const forwardBefore = existsSync('/proc/sys/net/ipv4/ip_forward') ? readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() : ''
  const root = isRoot()

  const pods = async (app: string): Promise<V1Pod[]> => (await c.core.listNamespacedPod({namespace: ns, labelSelector: `app=${app}`})).items.filter((p) => !p.metadata?.deletionTimestamp)

  const execIn = (pod: string, argv: string[]) => kubectl(['exec', '-n', ns, pod, '--', ...argv])

  beforeAll(() => {
    if (root) expect(f.upStderr).toContain('starting kube-proxy')
    c = f.c
    node = f.vnode
  })

  test('two replicas on one port both become Ready, each with its own address in the node pod CIDR', async () => {
    if (!root) return
    const podCidr = (await c.core.readNode({name: nodeName})).spec?.podCIDR
    expect(podCidr).toMatch(/^10\.244\.\d+\.0\/24$/)
    const r = await kubectl(['apply', '-n', ns, '-f', '-'], JSON.stringify(deployment('web', nodeName, 2)))
    expect(r.stderr).toBe('')
    const ready = await waitFor(
      async () => {
        const ps = await pods('web')
        return ps.length === 2 && ps.every((p) => p.status?.containerStatuses?.[0]?.ready) ? ps : undefined
      },
      'both replicas Ready',
      60_000,
      500,
    )
    const ips = ready.map((p) => p.status!.podIP!)
    expect(new Set(ips).size).toBe(2)
    const prefix = podCidr!.split('.').slice(0, 3).join('.') + '.'
    for (const p of ready) {
      expect(p.status!.podIP!.startsWith(prefix)).toBe(true)
      expect(p.status!.podIPs).toEqual([{ip: p.status!.podIP}])
      expect(p.status!.hostIP).toBe(primaryAddress())
      expect(p.status!.containerStatuses![0].restartCount).toBe(0)
    }
    expect(await ipForward()).toBe(forwardBefore)
  }, 90_000)

  test('the host reaches every pod over the bridge, and pods reach each other', async () => {
    if (!root) return
    const [a, b] = await pods('web')
    for (const p of [a, b]) {
      await assertLocalRoute(p.status!.podIP!, [bridge])
      const res = await httpGet(p.status!.podIP!, AppPort)
      expect(res.body).toBe(p.metadata!.name)
    }
    // Nothing listens on that port on the host itself: the replicas are in their own namespaces.
    expect((await httpGet('127.0.0.1', AppPort, '/', 1000)).error).toBe('ECONNREFUSED')
    const fetch = `fetch('http://${b.status!.podIP}:${AppPort}/').then(r => r.text()).then(t => console.log(t))`
    const r = await execIn(a.metadata!.name!, [NODE, '-e', fetch])
    expect(r.stdout.trim()).toBe(b.metadata!.name)
  }, 60_000)

  test("a Service's ClusterIP and DNS name reach the replicas, from the host and from a pod", async () => {
    if (!root) return
    await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'web'}, spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: AppPort}]}}})
    const clusterIp = (await c.core.readNamespacedService({name: 'web', namespace: ns})).spec!.clusterIP!
    await assertLocalRoute(clusterIp, [ServiceRouteInterface])
    // kube-proxy waits up to 30 s for a Node of its own host name before it writes its first rules.
    await waitFor(async () => (await natRules()).includes(`${ns}/web cluster IP`), 'kube-proxy rules for the Service', 90_000, 500)
    const names = new Set((await pods('web')).map((p) => p.metadata!.name!))
    const seen = new Set<string>()
    let last = ''
    await waitFor(
      async () => {
        const res = await httpGet(clusterIp, 80)
        last = JSON.stringify(res)
        if (res.body && names.has(res.body)) seen.add(res.body)
        return seen.size === names.size
      },
      () => `both replicas behind http://${clusterIp}/ (saw ${[...seen].join(', ') || 'none'}; last ${last})`,
      60_000,
      100,
    )
    await assertLocalRoute(ClusterDnsIp, [ServiceRouteInterface])
    const resolver = new Resolver({timeout: 2000, tries: 2})
    resolver.setServers([ClusterDnsIp])
    expect(await waitFor(() => resolver.resolve4(`web.${ns}.svc.cluster.local`), 'the Service in DNS', 30_000, 500)).toEqual([clusterIp])
    // From inside a pod: its resolv.conf names the cluster DNS, its routes send the service range to the host.
    const [a] = await pods('web')
    const fetch = `fetch('http://web.${ns}.svc.cluster.local/').then(r => r.text()).then(t => console.log(t))`
    const r = await execIn(a.metadata!.name!, [NODE, '-e', fetch])
    expect(names.has(r.stdout.trim())).toBe(true)
  }, 180_000)

  test('port-forward and the pod proxy reach the pod inside its namespace', async () => {
    if (!root) return
    const [a] = await pods('web')
    const name = a.metadata!.name!
    const proxied = await kubectl(['get', '--raw', `/api/v1/namespaces/${ns}/pods/${name}:${AppPort}/proxy/`])
    expect(proxied.stdout).toBe(name)
    const local = await freePort()
    const pf = execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), ['port-forward', '-n', ns, `pod/${name}`, `${local}:${AppPort}`], {
      env: {...process.env, KUBECONFIG: process.env[E2eEnv.kubeconfig]},
      reject: false,
    })
    try {
      const res = await waitFor(
        async () => {
          const x = await httpGet('127.0.0.1', local)
          return x.body ? x : undefined
        },
        'a response through port-forward',
        20_000,
        200,
      )
      expect(res.body).toBe(name)
    } finally {
      pf.kill('SIGTERM')
      await pf
    }
  }, 60_000)

  test('hostPort maps a host port to the pod through portmap', async () => {
    if (!root) return
    const hostPort = await freePort()
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name: 'hp', labels: {app: 'hp'}},
        spec: {nodeName, containers: [{name: 'main', image: 'node', command: [NODE, '-e', serverScript(AppPort)], ports: [{containerPort: AppPort, hostPort}]}]},
      },
    })
    await waitFor(async () => (await c.core.readNamespacedPod({name: 'hp', namespace: ns})).status?.containerStatuses?.[0]?.ready, 'hp ready', 30_000)
    const host = primaryAddress()!
    const res = await waitFor(
      async () => {
        const x = await httpGet(host, hostPort)
        return x.body ? x : undefined
      },
      `http://${host}:${hostPort}/`,
      20_000,
      200,
    )
    expect(res.body).toBe('hp')
    expect(await natRules()).toContain(`--dport ${hostPort}`)
  }, 60_000)

  test('a vnode restart adopts the pods with their namespaces and addresses', async () => {
    if (!root) return
    const before = await pods('web')
    node.child.kill('SIGKILL')
    await node.exited
    node = startVnode(nodeName, ['--sandbox', 'namespaces', '--pod-network', 'on'])
    await node.ready()
    await waitFor(async () => (await pods('web')).every((p) => p.status?.containerStatuses?.[0]?.ready), 'replicas Ready again', 30_000, 500)
    const after = await pods('web')
    expect(after.map((p) => [p.metadata!.name, p.status!.podIP]).sort()).toEqual(before.map((p) => [p.metadata!.name, p.status!.podIP]).sort())
    for (const p of after) {
      expect(p.status!.containerStatuses![0].restartCount).toBe(0)
      expect((await httpGet(p.status!.podIP!, AppPort)).body).toBe(p.metadata!.name)
    }
  }, 90_000)

  test('deleting the pods and stopping the node leaves no namespace, veth, bridge, lease or port mapping', async () => {
    if (!root) return
    const uids = [...(await pods('web')), ...(await pods('hp'))].map((p) => p.metadata!.uid!)
    expect(uids.length).toBe(3)
    const netnsBefore = await listNetns(NetnsPrefix)
    for (const uid of uids) expect(netnsBefore).toContain(NetnsPrefix + uid)
    // The host ends of this node's pods (other networks on the host have veths of their own).
    const veths = (await links(bridge)).filter((l) => l.startsWith('veth'))
    expect(veths.length).toBe(uids.length)
    await kubectl(['delete', '-n', ns, 'deployment/web', 'pod/hp', '--wait=false'])
    await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, 'pods gone', 60_000, 500)
    const left = await listNetns(NetnsPrefix)
    for (const uid of uids) expect(left).not.toContain(NetnsPrefix + uid)
    expect(await node.stop()).toBe(0)
    expect(await links()).not.toContain(bridge)
    expect((await links()).filter((l) => veths.includes(l))).toEqual([])
    expect(existsSync(join(node.stateDir, 'network'))).toBe(false)
    expect(await natRules()).not.toContain('CNI-HOSTPORT')
    expect(await ipForward()).toBe(forwardBefore)
  }, 120_000)
})

/** Without a pod network: the host's ports are shared, and a taken containerPort is said out loud. */
describeE2e('host network: a declared containerPort already taken on the host', () => {
  let c: Clients
  const nodeName = uniqueName('hostnet-node')
  const ns = uniqueName('hostnet')

  beforeAll(async () => {
    c = await clients()
    const p = startVnode(nodeName, ['--pod-network', 'off'])
    await p.ready()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await deleteNamespace(c.core, ns)
    await stopAllVnodes()
  })

  test('the second replica gets a Warning naming the port, the pod holding it, and the hostPort advice', async () => {
    const port = await freePort()
    const body = (name: string) => ({
      metadata: {name, labels: {app: 'dup'}},
      spec: {nodeName, containers: [{name: 'main', image: 'node', command: [NODE, '-e', serverScript(port)], ports: [{containerPort: port}]}]},
    })
    await c.core.createNamespacedPod({namespace: ns, body: body('first')})
    await waitFor(async () => (await httpGet('127.0.0.1', port)).body, 'first listening', 30_000, 200)
    await c.core.createNamespacedPod({namespace: ns, body: body('second')})
    const event = await waitFor(
      async () => {
        const r = await kubectl(['get', 'events', '-n', ns, '--field-selector', 'involvedObject.name=second,reason=PortInUse', '-o', 'jsonpath={.items[*].message}'])
        return r.stdout || undefined
      },
      'the PortInUse event',
      30_000,
      500,
    )
    expect(event).toContain(`containerPort ${port}/TCP is already in use on this host by pod ${ns}/first`)
    expect(event).toContain(`hostPort: ${port}`)
    const type = await kubectl(['get', 'events', '-n', ns, '--field-selector', 'involvedObject.name=second,reason=PortInUse', '-o', 'jsonpath={.items[0].type}'])
    expect(type.stdout).toBe('Warning')
  }, 60_000)
})
