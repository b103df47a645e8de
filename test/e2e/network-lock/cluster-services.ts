import {beforeAll, expect, test} from '@jest/globals'
import {readFileSync} from 'node:fs'
import {Resolver} from 'node:dns/promises'
import {join} from 'node:path'
import {isAlive} from '../../../src/cluster/process.js'
import {firewallAdded, type FirewallSnapshot, snapshotFirewall} from '../../../src/common/host-firewall.js'
import {freePort} from '../../../src/common/ports.js'
import {type Clients, clusterWithServices, describeHostE2e, kubectl, NODE, stopAllVnodes, testWhen, topNode, vnode, waitFor} from '../helpers.js'
import {assertLocalRoute, clusterNetwork, httpGet, isRoot, links, natRules, serviceDevice, unusedAddress} from '../network-helpers.js'
import {listNetns} from '../../../src/emulator/runtime/network/netns.js'

/** A container that serves its name over HTTP on port and burns a little CPU, so metrics-server has a rate to report. */
function server(name: string, port: number) {
  const script = `require('http').createServer((q, s) => s.end('${name}')).listen(${port}); setInterval(() => { let x = 0; for (let i = 0; i < 2e5; i++) x += i }, 100)`
  return {name: 'main', image: 'node', command: [NODE, '-e', script], ports: [{containerPort: port}]}
}

/**
 * `kubectl vnode cluster up` with its services, on a cluster of this file's
 * own: the aggregation layer and metrics-server behind `kubectl top`,
 * kube-proxy routing ClusterIPs on this host, CoreDNS answering for them,
 * and the service range routed to a local device so nothing leaves.
 */
describeHostE2e('cluster services: kubectl top, kube-proxy, CoreDNS and the service route', () => {
  // Before this file's cluster is up (hooks run in order): the host's KUBE-* iptables lines, as cluster down must leave them.
  let firewallBefore: FirewallSnapshot
  beforeAll(async () => {
    firewallBefore = await snapshotFirewall()
  })
  const f = clusterWithServices('svc')
  const node = f.node
  const ns = f.ns
  let c: Clients
  // The device and addresses this cluster got (its own on this host, as root), and the link to its
  // kube-proxy's namespace (also the namespace's name), where the service range is routed while it runs.
  let device = ''
  let proxyLink = ''
  let clusterDns = ''
  let serviceCidr = ''
  beforeAll(() => {
    c = f.c
    if (isRoot()) {
      const net = clusterNetwork(f.clusterDir)
      clusterDns = net.clusterDns
      serviceCidr = net.serviceCidr
      device = net.device!
      proxyLink = serviceDevice(net)
    }
  })

  test('the Metrics API is served: kubectl top node and kubectl top pod list the node and every running pod', async () => {
    const pods = ['top-a', 'top-b']
    for (const name of pods) {
      const port = await freePort()
      await c.core.createNamespacedPod({namespace: ns, body: {metadata: {name}, spec: {nodeName: node, containers: [server(name, port)]}}})
    }
    // metrics-server reports a node or pod once it has two scrapes of it (--metric-resolution=15s),
    // and its APIService is Available once its storage holds any: on a real kubelet too, `kubectl top`
    // answers a little while after the node is up.
    let last = ''
    await waitFor(
      async () => {
        const r = await kubectl(['get', 'apiservice', 'v1beta1.metrics.k8s.io', '-o', 'jsonpath={.status.conditions[?(@.type=="Available")]}'])
        last = r.stdout
        return r.exitCode === 0 && JSON.parse(r.stdout || '{}').status === 'True'
      },
      () => `the Metrics APIService to be Available (last: ${last})`,
      90_000,
      1000,
    )
    const top = await waitFor(
      async () => {
        const r = await kubectl(['top', 'pod', '-n', ns, '--no-headers'])
        last = r.stdout + r.stderr
        const names = r.stdout.split('\n').map((l) => l.split(/\s+/)[0])
        return r.exitCode === 0 && pods.every((p) => names.includes(p)) ? r.stdout : undefined
      },
      () => `kubectl top pod to list both pods (last: ${last})`,
      120_000,
      2000,
    )
    for (const line of top.trim().split('\n')) expect(line).toMatch(/^top-[ab]\s+\d+m\s+\d+Mi\s*$/)
    const nodeTop = await topNode(node)
    expect(nodeTop).toMatch(new RegExp(`^${node}\\s+\\d+m\\s+\\d+%\\s+\\d+Mi\\s+\\d+%`))
  }, 300_000)

  test("the service range is routed into kube-proxy's namespace, where an untranslated ClusterIP fails at once", async () => {
    if (!isRoot()) {
      expect(f.upStderr).toContain('kube-proxy skipped: it needs root')
      return
    }
    // An address of the range no Service holds: no rule translates it.
    const unused = unusedAddress(serviceCidr)
    await assertLocalRoute(unused, [proxyLink])
    const r = await httpGet(unused, 80, '/', 8000)
    expect(r.status).toBeUndefined()
    // The namespace's unreachable route answers: not a timeout, nothing looped or sent on.
    expect(r.error).toBe('EHOSTUNREACH')
    // kube-proxy's rules are the namespace's own, none on the host.
    await waitFor(async () => (await natRules(proxyLink)).includes('KUBE-SERVICES'), "kube-proxy's rules in its namespace", 60_000, 500)
    expect(await natRules()).not.toContain('KUBE-SERVICES')
  }, 30_000)

  testWhen(isRoot(), 'kube-proxy needs root')(
    'kube-proxy routes a Service ClusterIP to its pod, and CoreDNS resolves the Service name',
    async () => {
      // This cluster's own kube-proxy: `cluster up` skips it (and says why) when another cluster's runs on this host.
      expect(f.upStderr).toContain('starting kube-proxy')
      const port = await freePort()
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {metadata: {name: 'web', labels: {app: 'web'}}, spec: {nodeName: node, hostNetwork: true, containers: [server('hello-from-web', port)]}},
      })
      const svc = await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'web'}, spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: port}]}}})
      const clusterIp = svc.spec!.clusterIP!
      await waitFor(async () => (await c.core.readNamespacedPod({name: 'web', namespace: ns})).status?.containerStatuses?.[0]?.ready, 'web ready', 30_000)
      await assertLocalRoute(clusterIp, [proxyLink])
      const res = await waitFor(
        async () => {
          const r = await httpGet(clusterIp, 80)
          return r.body === 'hello-from-web' ? r : undefined
        },
        `GET http://${clusterIp}/ through kube-proxy`,
        60_000,
        500,
      )
      expect(res.status).toBe(200)
      expect(await natRules(proxyLink)).toContain(`${ns}/web`)

      await assertLocalRoute(clusterDns, [proxyLink])
      const resolver = new Resolver({timeout: 2000, tries: 2})
      resolver.setServers([clusterDns])
      const addrs = await waitFor(() => resolver.resolve4(`web.${ns}.svc.cluster.local`), 'the Service name in cluster DNS', 30_000, 500)
      expect(addrs).toEqual([clusterIp])
      const byName = await httpGet(addrs[0], 80)
      expect(byName.body).toBe('hello-from-web')
    },
    120_000,
  )

  test('cluster down stops every service and removes its rules and the service route', async () => {
    const state = JSON.parse(readFileSync(join(f.clusterDir, 'state.json'), 'utf8')) as {services?: {pids: Record<string, number>}}
    const pids = Object.values(state.services?.pids ?? {})
    expect(pids.length).toBe(isRoot() ? 3 : 2)
    await stopAllVnodes()
    const down = await vnode(['cluster', 'down', '--dir', f.clusterDir], {timeout: 60_000})
    expect(down.exitCode).toBe(0)
    for (const pid of pids) expect(isAlive(pid)).toBe(false)
    if (isRoot()) expect(await links()).not.toContain(device)
    if (isRoot()) expect(await links()).not.toContain(proxyLink)
    if (isRoot()) expect(await listNetns(proxyLink)).toEqual([])
    expect(await natRules()).not.toContain(`${ns}/web`)
    expect(await natRules()).not.toContain('kube-system/kube-dns')
    // What kube-proxy's --cleanup keeps (KUBE-FIREWALL and its jumps from INPUT and OUTPUT) goes too.
    expect(firewallAdded(firewallBefore, await snapshotFirewall())).toEqual({})
  }, 90_000)
})
