import {afterAll, beforeAll, expect} from '@jest/globals'
import * as k8s from '@kubernetes/client-node'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {ClusterNetwork} from '../../../src/cluster/cluster-network.js'
import {PodNetworkAnnotation} from '../../../src/common/labels.js'
import {bridgeName} from '../../../src/emulator/runtime/network/config.js'
import {listNetns} from '../../../src/emulator/runtime/network/netns.js'
import {NetnsPrefix} from '../../../src/emulator/runtime/network/pod-network.js'
import {E2eEnv} from '../env.mjs'
import {describeHostE2e, NODE, startVnode, stopAllVnodes, testWhen, uniqueName, vnode, type VnodeProcess, waitFor} from '../helpers.js'
import {assertLocalRoute, clusterNetwork, httpGet, isRoot, links, natRules, serviceDevice} from '../network-helpers.js'
import {execa} from 'execa'

const AppPort = 8080
/**
 * The server pod's name differs from its Service's: a pod's own hostname is
 * in its /etc/hosts (as the kubelet writes it), and files come before DNS,
 * so a pod named `web` dialling `web` would reach itself on the Service's
 * port, never through the Service.
 */
const PodName = 'server'
const ServiceName = 'web'

interface Side {
  name: string
  dir: string
  upStderr: string
  net: ClusterNetwork
  core: k8s.CoreV1Api
  node: string
  vnode?: VnodeProcess
  ns: string
}

async function kubectlOn(side: Side, args: string[]): Promise<{stdout: string; stderr: string; exitCode: number}> {
  const r = await execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), ['--kubeconfig', join(side.dir, 'kubeconfig'), ...args], {reject: false, timeout: 60_000})
  return {stdout: String(r.stdout), stderr: String(r.stderr), exitCode: r.exitCode ?? -1}
}

/**
 * Two `cluster up` clusters on one host, as root, on the default flags:
 * each its own API address, service and pod ranges, DNS address, device,
 * and a kube-proxy in a network namespace of its own (kube-proxy's chains
 * have fixed names, so two never share one namespace's tables). Each
 * cluster's pods resolve and reach its own Services and never the other's.
 * Both stopped: nothing of either is left.
 */
describeHostE2e('two local clusters on one host', () => {
  // Made in beforeAll, not when the file is collected: a run that filters out every test here runs no afterAll to remove it.
  let base = ''
  const sides: Side[] = []
  const bridges: string[] = []

  beforeAll(async () => {
    // Every test here is rootOnly(...): skipped without root, failed under CI.
    if (!isRoot()) return
    base = mkdtempSync(join(tmpdir(), 'vnode-two-'))
    for (const name of ['a', 'b']) {
      const dir = join(base, name)
      const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0'], {timeout: 150_000})
      if (up.exitCode !== 0) throw new Error(`cluster up ${name} exited ${up.exitCode}: ${up.stderr}`)
      const kc = new k8s.KubeConfig()
      kc.loadFromFile(join(dir, 'kubeconfig'))
      const side: Side = {name, dir, upStderr: up.stderr, net: clusterNetwork(dir), core: kc.makeApiClient(k8s.CoreV1Api), node: uniqueName(`two-${name}`), ns: uniqueName(`two-${name}`)}
      sides.push(side)
    }
    for (const s of sides) {
      s.vnode = startVnode(s.node, ['--kubeconfig', join(s.dir, 'kubeconfig'), '--sandbox', 'auto'])
      await s.vnode.ready()
      bridges.push(bridgeName(s.node))
      await s.core.createNamespace({body: {metadata: {name: s.ns}}})
      const script = `require('http').createServer((q, r) => r.end('from-${s.name}')).listen(${AppPort})`
      await s.core.createNamespacedPod({
        namespace: s.ns,
        body: {
          metadata: {name: PodName, labels: {app: 'web'}},
          // Node.js as its sandbox's PID 1 ignores SIGTERM, as any PID 1 without a handler: a short grace, so the node's stop does not wait out 30 s.
          spec: {
            nodeName: s.node,
            terminationGracePeriodSeconds: 2,
            containers: [{name: 'main', image: 'node', command: [NODE, '-e', script], readinessProbe: {tcpSocket: {port: AppPort}, periodSeconds: 1}}],
          },
        },
      })
      await s.core.createNamespacedService({namespace: s.ns, body: {metadata: {name: ServiceName}, spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: AppPort}]}}})
      await waitFor(async () => (await s.core.readNamespacedPod({name: PodName, namespace: s.ns})).status?.containerStatuses?.[0]?.ready, `${PodName} Ready in cluster ${s.name}`, 60_000, 500)
    }
  }, 400_000)

  afterAll(async () => {
    await stopAllVnodes()
    for (const s of sides) await vnode(['cluster', 'down', '--dir', s.dir], {timeout: 60_000})
    if (base) rmSync(base, {recursive: true, force: true})
  }, 120_000)

  const rootOnly = testWhen(isRoot(), 'a cluster of its own address and device needs root')

  rootOnly(
    'each cluster has its own API address, service and pod ranges, DNS address, device and kube-proxy namespace',
    async () => {
      const [a, b] = sides
      for (const k of ['apiAddress', 'serviceCidr', 'podCidr', 'clusterDns', 'device', 'proxyLink'] as const) expect(a.net[k]).not.toBe(b.net[k])
      for (const s of sides) {
        expect(s.net.reason).toBeUndefined()
        expect(s.upStderr).toContain('starting kube-proxy')
        await assertLocalRoute(s.net.apiAddress, ['lo', s.net.device!])
        await assertLocalRoute(s.net.clusterDns, [serviceDevice(s.net)])
        const n = await s.core.readNode({name: s.node})
        expect(n.metadata?.annotations?.[PodNetworkAnnotation]).toBe('pod')
        expect(n.spec?.podCIDR?.split('.').slice(0, 2)).toEqual(s.net.podCidr.split('.').slice(0, 2))
      }
    },
    30_000,
  )

  /** Runs a Node.js program in the side's server pod; its stdout, trimmed, or its error. */
  async function nodeIn(side: Side, program: string): Promise<string> {
    const r = await kubectlOn(side, ['exec', '-n', side.ns, PodName, '--', NODE, '-e', program])
    return r.exitCode === 0 ? r.stdout.trim() : `exit ${r.exitCode}: ${r.stderr.trim()}`
  }

  rootOnly(
    "each cluster's pods resolve and reach their own cluster's Service through its own kube-proxy",
    async () => {
      for (const s of sides) {
        // The Service's only endpoint is the pod asking: kube-proxy sends the connection back to it (hairpin).
        const fetch = `fetch('http://${ServiceName}/').then(r => r.text()).then(t => console.log(t), e => { console.log('error ' + (e.cause?.code ?? e.message)) })`
        let last = ''
        await waitFor(
          async () => {
            last = await nodeIn(s, fetch)
            return last === `from-${s.name}`
          },
          () => `http://${ServiceName}/ from a pod of cluster ${s.name} (last: ${last})`,
          90_000,
          1000,
        )
        const resolv = await kubectlOn(s, ['exec', '-n', s.ns, PodName, '--', 'cat', '/etc/resolv.conf'])
        expect(resolv.stdout).toContain(`nameserver ${s.net.clusterDns}`)
        // Its kube-proxy's rules are in its own namespace, naming its own Service only.
        const clusterIp = (await s.core.readNamespacedService({name: ServiceName, namespace: s.ns})).spec!.clusterIP!
        const rules = await natRules(serviceDevice(s.net))
        expect(rules).toContain(`${s.ns}/${ServiceName}`)
        for (const o of sides.filter((x) => x !== s)) expect(rules).not.toContain(`${o.ns}/${ServiceName}`)
        await assertLocalRoute(clusterIp, [serviceDevice(s.net)])
        expect((await httpGet(clusterIp, 80)).body).toBe(`from-${s.name}`)
      }
      // Nothing of either kube-proxy is in the host's own tables.
      expect(await natRules()).not.toContain('KUBE-SERVICES')
    },
    240_000,
  )

  rootOnly(
    "a pod never reaches or resolves the other cluster's Service",
    async () => {
      for (const [s, o] of [sides, [...sides].reverse()]) {
        // The other cluster's name is unknown to this cluster's DNS.
        const lookup = `require('dns').lookup('${ServiceName}.${o.ns}.svc.cluster.local', (e, a) => console.log(e ? e.code : a))`
        expect(await nodeIn(s, lookup)).toBe('ENOTFOUND')
        // The other cluster's ClusterIP has no route in this cluster's pods: nothing is dialled.
        const otherIp = (await o.core.readNamespacedService({name: ServiceName, namespace: o.ns})).spec!.clusterIP!
        const route = await kubectlOn(s, ['exec', '-n', s.ns, PodName, '--', 'ip', 'route', 'get', otherIp])
        expect(route.exitCode).not.toBe(0)
        expect(route.stderr).toMatch(/unreachable/i)
        // Nor of the other's DNS address.
        const dnsRoute = await kubectlOn(s, ['exec', '-n', s.ns, PodName, '--', 'ip', 'route', 'get', o.net.clusterDns])
        expect(dnsRoute.exitCode).not.toBe(0)
      }
    },
    60_000,
  )

  rootOnly(
    'stopping both nodes and both clusters leaves no device, bridge, namespace, lease or rule of theirs',
    async () => {
      const uids = (await Promise.all(sides.map(async (s) => (await s.core.readNamespacedPod({name: PodName, namespace: s.ns})).metadata!.uid!))).map((u) => NetnsPrefix + u)
      expect(await Promise.all(sides.map((s) => s.vnode!.stop()))).toEqual([0, 0])
      for (const s of sides) expect((await vnode(['cluster', 'down', '--dir', s.dir], {timeout: 60_000})).exitCode).toBe(0)
      const left = await links()
      for (const s of sides) expect(left).not.toContain(s.net.device)
      for (const s of sides) expect(left).not.toContain(serviceDevice(s.net))
      for (const s of sides) expect(await listNetns(serviceDevice(s.net))).toEqual([])
      for (const br of bridges) expect(left).not.toContain(br)
      const netns = await listNetns(NetnsPrefix)
      for (const u of uids) expect(netns).not.toContain(u)
      const rules = await natRules()
      expect(rules).not.toContain('KUBE-SERVICES')
      expect(rules).not.toContain('CNI-HOSTPORT')
      for (const s of sides) expect((await execa('ip', ['-o', 'route', 'show', s.net.serviceCidr], {reject: false})).stdout).toBe('')
    },
    120_000,
  )
})
