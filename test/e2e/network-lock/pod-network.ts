import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {Resolver} from 'node:dns/promises'
import {join} from 'node:path'
import {freePort} from '../../../src/common/ports.js'
import {primaryAddress} from '../../../src/emulator/node/host.js'
import {bridgeName} from '../../../src/emulator/runtime/network/config.js'
import {listNetns} from '../../../src/emulator/runtime/network/netns.js'
import {NetnsPrefix} from '../../../src/emulator/runtime/network/pod-network.js'
import {E2eEnv} from '../env.mjs'
import {
  clients,
  type Clients,
  clusterWithServices,
  createNamespace,
  deleteNamespace,
  describeHostE2e,
  kubectl,
  mountBaseHolder,
  NODE,
  startVnode,
  stopAllVnodes,
  testWhen,
  uniqueName,
  vnode,
  type VnodeProcess,
  waitFor,
} from '../helpers.js'
import {PodNetworkAnnotation} from '../../../src/common/labels.js'
import {assertLocalRoute, clusterNetwork, httpGet, isRoot, links, natRules, serviceDevice} from '../network-helpers.js'
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
describeHostE2e('pod network: a namespace and an address per pod', () => {
  // A cluster of this file's own, with kube-proxy and CoreDNS, and node CIDRs allocated; the node on
  // the default flags: as root, the pod network is the default (cluster up gave the API server an address pods reach).
  // (--sandbox auto is up's own default; startVnode otherwise asks for none.)
  const f = clusterWithServices('net', ['--sandbox', 'auto'])
  const nodeName = f.node
  const ns = f.ns
  let c: Clients
  let node: VnodeProcess
  const bridge = bridgeName(nodeName)
  const forwardBefore = existsSync('/proc/sys/net/ipv4/ip_forward') ? readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() : ''
  const root = isRoot()
  /** The pod network needs root: elsewhere these fail under CI=true and are skipped otherwise, never passed. */
  const rootTest = testWhen(root, 'the pod network needs root')

  const pods = async (app: string): Promise<V1Pod[]> => (await c.core.listNamespacedPod({namespace: ns, labelSelector: `app=${app}`})).items.filter((p) => !p.metadata?.deletionTimestamp)

  /** `kubectl port-forward` of the pod's port to local, running until killed. */
  const portForward = (pod: string, local: number, port: number) =>
    execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), ['port-forward', '-n', ns, `pod/${pod}`, `${local}:${port}`], {
      env: {...process.env, KUBECONFIG: process.env[E2eEnv.kubeconfig]},
      reject: false,
    })
  /** The body of an HTTP GET through a port-forward of the pod's port. */
  const throughPortForward = async (pod: string, port: number): Promise<string | undefined> => {
    const local = await freePort()
    const pf = portForward(pod, local, port)
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
      return res.body
    } finally {
      pf.kill('SIGTERM')
      await pf
    }
  }
  const execIn = (pod: string, argv: string[]) => kubectl(['exec', '-n', ns, pod, '--', ...argv])

  // The device this cluster's service range is routed to (the link to its kube-proxy's namespace, also the namespace's name) and its addresses.
  let device = ''
  let ClusterDnsIp = ''
  let podRange = ''
  beforeAll(() => {
    if (root) expect(f.upStderr).toContain('starting kube-proxy')
    c = f.c
    node = f.vnode
    if (root) {
      const net = clusterNetwork(f.clusterDir)
      ClusterDnsIp = net.clusterDns
      podRange = net.podCidr
      device = serviceDevice(net)
    }
  })

  rootTest(
    'two replicas on one port both become Ready, each with its own address in the node pod CIDR',
    async () => {
      const podCidr = (await c.core.readNode({name: nodeName})).spec?.podCIDR
      expect(podCidr).toMatch(new RegExp(`^${podRange.split('.').slice(0, 2).join('\\.')}\\.\\d+\\.0/24$`))
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
    },
    90_000,
  )

  rootTest(
    'the host reaches every pod over the bridge, and pods reach each other',
    async () => {
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
    },
    60_000,
  )

  const nsfsMounts = (mountinfo: string) => mountinfo.split('\n').filter((l) => / - nsfs /.test(l))

  rootTest(
    "no container's mount table holds the pods' network namespaces (sandboxes start from the host's mounts without them), unless a hostPath volume asks for them",
    async () => {
      // On the host, each pod's and pool entry's namespace is an nsfs mount under /run/netns.
      const [a] = await pods('web')
      const own = (JSON.parse(readFileSync(join(node.stateDir, 'network', 'pods', `${a!.metadata!.uid}.json`), 'utf8')) as {netns: string}).netns
      expect(nsfsMounts(readFileSync('/proc/self/mountinfo', 'utf8')).some((l) => l.split(' ')[4] === own)).toBe(true)
      // The namespace the node's sandboxes start from has none, and no container sees one.
      const holder = mountBaseHolder(node.pid)
      expect(holder).toBeDefined()
      expect(nsfsMounts(readFileSync(`/proc/${holder}/mountinfo`, 'utf8'))).toEqual([])
      const r = await execIn(a!.metadata!.name!, [NODE, '-e', "process.stdout.write(require('fs').readFileSync('/proc/self/mountinfo', 'utf8'))"])
      expect(r.exitCode).toBe(0)
      expect(r.stdout).toContain(' / ')
      expect(nsfsMounts(r.stdout)).toEqual([])
      // A pod that asks for the host's /run/netns (a hostPath volume) gets it as the host has it: its start begins from the host's mounts.
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: 'netns-view'},
        spec: {
          nodeName,
          terminationGracePeriodSeconds: 1,
          volumes: [{name: 'netns', hostPath: {path: '/run/netns'}}],
          containers: [{name: 'main', image: 'node', command: [NODE, '-e', 'setInterval(() => {}, 1e6)'], volumeMounts: [{name: 'netns', mountPath: '/host-netns', readOnly: true}]}],
        },
      }
      expect((await kubectl(['apply', '-n', ns, '-f', '-'], JSON.stringify(pod))).exitCode).toBe(0)
      await waitFor(async () => (await c.core.readNamespacedPod({namespace: ns, name: 'netns-view'})).status?.containerStatuses?.[0]?.state?.running, 'netns-view running', 60_000, 250)
      const viewed = await execIn('netns-view', [NODE, '-e', "process.stdout.write(require('fs').readFileSync('/proc/self/mountinfo', 'utf8'))"])
      expect(nsfsMounts(viewed.stdout).some((l) => l.split(' ')[4] === `/host-netns/${own.split('/').pop()}`)).toBe(true)
      await kubectl(['delete', '-n', ns, 'pod/netns-view', '--wait=false'])
      await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns, fieldSelector: 'metadata.name=netns-view'})).items.length === 0, 'netns-view gone', 60_000, 500)
    },
    120_000,
  )

  rootTest(
    'a mount made on the host after the node is up is in the next containers, as on the host: a hostPath of it shows its files',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'vnode-e2e-hostmount-'))
      let mounted = false
      try {
        expect((await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], {reject: false})).exitCode).toBe(0)
        mounted = true
        writeFileSync(join(dir, 'marker'), 'on the new mount')
        // The first start after the change, and one after that, both see the mount's file, and both begin from a base made
        // again (no network namespace file in their mount table), not from the host's namespace, where a namespace removed
        // while bwrap binds /run fails its setup.
        for (const name of ['mounted-1', 'mounted-2']) {
          const pod = {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: {name},
            spec: {
              nodeName,
              terminationGracePeriodSeconds: 1,
              volumes: [{name: 'm', hostPath: {path: dir}}],
              containers: [{name: 'main', image: 'node', command: [NODE, '-e', 'setInterval(() => {}, 1e6)'], volumeMounts: [{name: 'm', mountPath: '/m', readOnly: true}]}],
            },
          }
          expect((await kubectl(['apply', '-n', ns, '-f', '-'], JSON.stringify(pod))).exitCode).toBe(0)
          await waitFor(async () => (await c.core.readNamespacedPod({namespace: ns, name})).status?.containerStatuses?.[0]?.state?.running, `${name} running`, 60_000, 250)
          const r = await execIn(name, [NODE, '-e', "process.stdout.write(require('fs').readFileSync('/m/marker', 'utf8'))"])
          expect(r.stdout).toBe('on the new mount')
          const table = await execIn(name, [NODE, '-e', "process.stdout.write(require('fs').readFileSync('/proc/self/mountinfo', 'utf8'))"])
          expect(table.stdout).toContain(' /m ')
          expect(nsfsMounts(table.stdout)).toEqual([])
        }
      } finally {
        await kubectl(['delete', '-n', ns, 'pod/mounted-1', 'pod/mounted-2', '--wait=false', '--ignore-not-found'])
        await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.every((p) => !p.metadata!.name!.startsWith('mounted-')), 'mounted-* gone', 60_000, 500)
        if (mounted) await execa('umount', [dir], {reject: false})
        rmSync(dir, {recursive: true, force: true})
      }
    },
    150_000,
  )

  rootTest(
    'kubectl debug --copy-to: the copy binds the same port in its own namespace and runs beside the original',
    async () => {
      const [a] = await pods('web')
      const original = a.metadata!.name!
      const r = await kubectl(['debug', original, '-n', ns, '--copy-to=web-copy', '--same-node', '--image=busybox', '-c', 'dbg', '--', 'sleep', '3600'])
      expect(r.exitCode).toBe(0)
      const copy = await waitFor(
        async () => {
          const p = await c.core.readNamespacedPod({name: 'web-copy', namespace: ns})
          return p.status?.containerStatuses?.find((s) => s.name === 'main')?.ready ? p : undefined
        },
        "the copy's server Ready",
        60_000,
        500,
      )
      expect(copy.status!.containerStatuses!.find((s) => s.name === 'main')!.restartCount).toBe(0)
      expect(copy.status!.podIP).not.toBe(a.status!.podIP)
      await assertLocalRoute(copy.status!.podIP!, [bridge])
      expect((await httpGet(copy.status!.podIP!, AppPort)).body).toBe('web-copy')
      // The original kept its port and was never restarted.
      const now = await c.core.readNamespacedPod({name: original, namespace: ns})
      expect(now.status!.containerStatuses![0]).toMatchObject({ready: true, restartCount: 0})
      expect((await httpGet(now.status!.podIP!, AppPort)).body).toBe(original)
      await c.core.deleteNamespacedPod({name: 'web-copy', namespace: ns, gracePeriodSeconds: 0})
      await waitFor(async () => !(await c.core.readNamespacedPod({name: 'web-copy', namespace: ns}).catch(() => undefined)), 'the copy gone', 30_000, 500)
    },
    120_000,
  )

  rootTest(
    "a Service's ClusterIP and DNS name reach the replicas, from the host and from a pod",
    async () => {
      await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'web'}, spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: AppPort}]}}})
      const clusterIp = (await c.core.readNamespacedService({name: 'web', namespace: ns})).spec!.clusterIP!
      await assertLocalRoute(clusterIp, [device])
      // kube-proxy waits up to 30 s for a Node of its own host name before it writes its first rules.
      await waitFor(async () => (await natRules(device)).includes(`${ns}/web cluster IP`), 'kube-proxy rules for the Service', 90_000, 500)
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
      await assertLocalRoute(ClusterDnsIp, [device])
      const resolver = new Resolver({timeout: 2000, tries: 2})
      resolver.setServers([ClusterDnsIp])
      expect(await waitFor(() => resolver.resolve4(`web.${ns}.svc.cluster.local`), 'the Service in DNS', 30_000, 500)).toEqual([clusterIp])
      // From inside a pod: its resolv.conf names the cluster DNS, its routes send the service range to the host.
      const [a] = await pods('web')
      const fetch = `fetch('http://web.${ns}.svc.cluster.local/').then(r => r.text()).then(t => console.log(t))`
      const r = await execIn(a.metadata!.name!, [NODE, '-e', fetch])
      expect(names.has(r.stdout.trim())).toBe(true)
    },
    180_000,
  )

  rootTest(
    'port-forward and the pod proxy reach the pod inside its namespace',
    async () => {
      const [a] = await pods('web')
      const name = a.metadata!.name!
      const proxied = await kubectl(['get', '--raw', `/api/v1/namespaces/${ns}/pods/${name}:${AppPort}/proxy/`])
      expect(proxied.stdout).toBe(name)
      expect(await throughPortForward(name, AppPort)).toBe(name)
    },
    60_000,
  )

  testWhen(root, 'the pod network needs root')(
    "port-forward dials localhost inside the pod's namespace, as containerd does: a server on the pod's loopback only answers; a closed port is the kubelet's error",
    async () => {
      const closed = AppPort + 7
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'lo-only'},
          spec: {nodeName, containers: [{name: 'main', image: 'node', command: [NODE, '-e', `require('http').createServer((q, s) => s.end('on loopback')).listen(${AppPort}, '127.0.0.1')`]}]},
        },
      })
      await waitFor(async () => (await c.core.readNamespacedPod({name: 'lo-only', namespace: ns})).status?.containerStatuses?.[0]?.state?.running, 'lo-only running', 30_000)
      const pod = await c.core.readNamespacedPod({name: 'lo-only', namespace: ns})
      // Not reachable from the host at the pod's address: only inside its namespace.
      expect((await httpGet(pod.status!.podIP!, AppPort)).body).toBeUndefined()
      expect(await throughPortForward('lo-only', AppPort)).toBe('on loopback')
      // A closed port: the forward reports the kubelet's words for both families' dials, and kubectl prints them.
      const local2 = await freePort()
      const refused = portForward('lo-only', local2, closed)
      let stdout = ''
      let stderr = ''
      refused.stdout?.on('data', (d: Buffer) => (stdout += d.toString()))
      refused.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
      try {
        await waitFor(
          () => /Forwarding from 127\.0\.0\.1/.test(stdout),
          () => `kubectl port-forward listening (stdout ${stdout}, stderr ${stderr})`,
          20_000,
          100,
        )
        expect((await httpGet('127.0.0.1', local2)).body ?? '').toBe('')
        await waitFor(
          () => /error forwarding port/.test(stderr),
          () => `the forward's error (stderr ${stderr})`,
          10_000,
          100,
        )
      } finally {
        refused.kill('SIGTERM')
        await refused
      }
      expect(stderr).toContain(
        `error forwarding port ${closed} to pod ${ns}/lo-only, uid ${pod.metadata!.uid}: failed to connect to localhost:${closed}, IPv4: dial tcp4 127.0.0.1:${closed}: connect: connection refused IPv6 dial tcp6 [::1]:${closed}: `,
      )
      await c.core.deleteNamespacedPod({name: 'lo-only', namespace: ns, gracePeriodSeconds: 0})
    },
    90_000,
  )

  rootTest(
    'hostPort maps a host port to the pod through portmap',
    async () => {
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
    },
    60_000,
  )

  rootTest(
    'a vnode restart adopts the pods with their namespaces and addresses',
    async () => {
      const before = await pods('web')
      node.child.kill('SIGKILL')
      await node.exited
      node = startVnode(nodeName, ['--sandbox', 'auto'])
      await node.ready()
      await waitFor(async () => (await pods('web')).every((p) => p.status?.containerStatuses?.[0]?.ready), 'replicas Ready again', 30_000, 500)
      const after = await pods('web')
      expect(after.map((p) => [p.metadata!.name, p.status!.podIP]).sort()).toEqual(before.map((p) => [p.metadata!.name, p.status!.podIP]).sort())
      for (const p of after) {
        expect(p.status!.containerStatuses![0].restartCount).toBe(0)
        expect((await httpGet(p.status!.podIP!, AppPort)).body).toBe(p.metadata!.name)
      }
    },
    90_000,
  )

  testWhen(root, 'the pod network needs root')(
    'the node says its pods are on the pod network: its annotation and the NETWORK column of pods -o wide',
    async () => {
      const n = await c.core.readNode({name: nodeName})
      expect(n.metadata?.annotations?.[PodNetworkAnnotation]).toBe('pod')
      const r = await vnode(['pods', '-n', ns, '-o', 'wide'])
      expect(r.exitCode).toBe(0)
      const [header, ...rows] = r.stdout.trim().split('\n')
      expect(header).toMatch(/\bNETWORK\s+ENDPOINT\s*$/)
      expect(rows.length).toBeGreaterThan(0)
      // The last two columns: the pod network, and the API server reaching the node directly.
      for (const row of rows) expect(row).toMatch(/\spod\s+direct\s*$/)
    },
    60_000,
  )

  testWhen(root, 'the pod network needs root')(
    'in-cluster kubectl in a pod of its own network namespace lists pods, through the API address and the kubernetes Service',
    async () => {
      await kubectl(['create', 'rolebinding', 'sa-view', '-n', ns, '--clusterrole=view', `--serviceaccount=${ns}:default`])
      const bin = join(process.env[E2eEnv.binDir]!, 'kubectl')
      // In-cluster config (KUBERNETES_SERVICE_HOST: the API server's own address), then the Service name (CoreDNS, kube-proxy).
      const sa = '/var/run/secrets/kubernetes.io/serviceaccount'
      const viaService = `--server=https://kubernetes.default.svc.cluster.local --token=$(cat ${sa}/token) --certificate-authority=${sa}/ca.crt`
      const script = `readlink /proc/self/ns/net && ${bin} get pods -n ${ns} -o name && ${bin} ${viaService} get pods -n ${ns} -o name`
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {metadata: {name: 'incluster'}, spec: {nodeName, restartPolicy: 'Never', containers: [{name: 'main', image: 'busybox', command: ['/bin/sh', '-c', script]}]}},
      })
      const done = await waitFor(
        async () => {
          const p = await c.core.readNamespacedPod({name: 'incluster', namespace: ns})
          return ['Succeeded', 'Failed'].includes(p.status?.phase ?? '') ? p : undefined
        },
        'the in-cluster pod to finish',
        60_000,
        500,
      )
      const logs = await kubectl(['logs', '-n', ns, 'incluster'])
      expect({phase: done.status?.phase, logs: logs.stdout + logs.stderr}).toEqual({phase: 'Succeeded', logs: expect.stringContaining('pod/incluster')})
      const lines = logs.stdout.split('\n')
      expect(lines.filter((l) => l === 'pod/incluster').length).toBe(2)
      // Its own network namespace, not the host's.
      expect(lines[0]).toMatch(/^net:\[\d+\]$/)
      expect(lines[0]).not.toBe(readlinkSync('/proc/self/ns/net'))
      await c.core.deleteNamespacedPod({name: 'incluster', namespace: ns})
    },
    90_000,
  )

  testWhen(root, 'the pod network needs root')(
    'kubectl rollout restart of 2 replicas with maxSurge 1, maxUnavailable 0 completes while a client keeps getting answers',
    async () => {
      const d = deployment('roll', nodeName, 2) as ReturnType<typeof deployment> & {spec: Record<string, unknown>}
      d.spec.strategy = {type: 'RollingUpdate', rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
      // Out of the Service's endpoints before it stops answering, as a real server's drain would be.
      const main = d.spec.template.spec.containers[0] as Record<string, unknown>
      main.lifecycle = {preStop: {exec: {command: [NODE, '-e', 'setTimeout(() => {}, 3000)']}}}
      d.spec.template.spec.terminationGracePeriodSeconds = 10
      expect((await kubectl(['apply', '-n', ns, '-f', '-'], JSON.stringify(d))).exitCode).toBe(0)
      await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'roll'}, spec: {selector: {app: 'roll'}, ports: [{port: 80, targetPort: AppPort}]}}})
      const clusterIp = (await c.core.readNamespacedService({name: 'roll', namespace: ns})).spec!.clusterIP!
      await assertLocalRoute(clusterIp, [device])
      expect((await kubectl(['rollout', 'status', '-n', ns, 'deployment/roll', '--timeout=60s'])).exitCode).toBe(0)
      await waitFor(async () => (await httpGet(clusterIp, 80)).body, `http://${clusterIp}/ answering`, 30_000, 200)
      const before = new Set((await pods('roll')).map((p) => p.metadata!.name!))
      let stop = false
      const results: string[] = []
      const loop = (async () => {
        while (!stop) {
          const r = await httpGet(clusterIp, 80, '/', 2000)
          results.push(r.body ? 'ok' : `${r.error ?? r.status}`)
          await new Promise((res) => setTimeout(res, 100))
        }
      })()
      try {
        expect((await kubectl(['rollout', 'restart', '-n', ns, 'deployment/roll'])).exitCode).toBe(0)
        const status = await kubectl(['rollout', 'status', '-n', ns, 'deployment/roll', '--timeout=90s'])
        expect(status.stderr + status.stdout).toContain('successfully rolled out')
      } finally {
        stop = true
        await loop
      }
      const after = await pods('roll')
      expect(after.length).toBe(2)
      for (const p of after) expect(before.has(p.metadata!.name!)).toBe(false)
      expect(results.length).toBeGreaterThan(10)
      expect(results.filter((r) => r !== 'ok')).toEqual([])
      await kubectl(['delete', '-n', ns, 'deployment/roll', 'service/roll', '--wait=false'])
      await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns, labelSelector: 'app=roll'})).items.length === 0, 'the Deployment pods gone', 60_000, 500)
    },
    180_000,
  )

  testWhen(root, 'the pod network needs root')(
    "a StatefulSet's pods resolve each other's names through the headless Service",
    async () => {
      const labels = {app: 'peers'}
      await c.core.createNamespacedService({namespace: ns, body: {metadata: {name: 'peers'}, spec: {clusterIP: 'None', selector: labels, ports: [{port: AppPort}]}}})
      const sts = {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: {name: 'peers'},
        spec: {
          serviceName: 'peers',
          replicas: 2,
          selector: {matchLabels: labels},
          template: {
            metadata: {labels},
            spec: {
              nodeName,
              terminationGracePeriodSeconds: 1,
              containers: [{name: 'main', image: 'node', command: [NODE, '-e', serverScript(AppPort)], readinessProbe: {tcpSocket: {port: AppPort}, periodSeconds: 1}}],
            },
          },
        },
      }
      expect((await kubectl(['apply', '-n', ns, '-f', '-'], JSON.stringify(sts))).exitCode).toBe(0)
      expect((await kubectl(['rollout', 'status', '-n', ns, 'statefulset/peers', '--timeout=90s'])).exitCode).toBe(0)
      const ip1 = (await c.core.readNamespacedPod({name: 'peers-1', namespace: ns})).status!.podIP!
      // From peers-0, by the pod's resolv.conf (the search path too): the peer's stable name.
      const lookup = `require('dns').lookup('peers-1.peers', {family: 4}, (e, a) => { if (e) { console.error(e.code); process.exit(1) } console.log(a) })`
      const r = await waitFor(
        async () => {
          const x = await execIn('peers-0', [NODE, '-e', lookup])
          return x.stdout.trim() === ip1 ? x : undefined
        },
        `peers-1.peers to resolve to ${ip1} in peers-0`,
        30_000,
        1000,
      )
      expect(r.stdout.trim()).toBe(ip1)
      const full = await execIn('peers-0', [NODE, '-e', lookup.replace("'peers-1.peers'", `'peers-1.peers.${ns}.svc.cluster.local'`)])
      expect(full.stdout.trim()).toBe(ip1)
      await kubectl(['delete', '-n', ns, 'statefulset/peers', 'service/peers', '--wait=false'])
      await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns, labelSelector: 'app=peers'})).items.length === 0, 'the StatefulSet pods gone', 60_000, 500)
    },
    180_000,
  )

  rootTest(
    'deleting the pods and stopping the node leaves no namespace, veth, bridge, lease or port mapping',
    async () => {
      const uids = [...(await pods('web')), ...(await pods('hp'))].map((p) => p.metadata!.uid!)
      expect(uids.length).toBe(3)
      // Each pod's namespace is the one its network record names: made for it, or a warm pool entry it leased.
      const podNetns = uids.map((uid) => (JSON.parse(readFileSync(join(node.stateDir, 'network', 'pods', `${uid}.json`), 'utf8')) as {netns: string}).netns.split('/').pop()!)
      const poolNetns = () =>
        (existsSync(join(node.stateDir, 'network', 'pool')) ? readdirSync(join(node.stateDir, 'network', 'pool')).filter((f) => f.endsWith('.json')) : []).map((f) =>
          (JSON.parse(readFileSync(join(node.stateDir, 'network', 'pool', f), 'utf8')) as {netns: string}).netns.split('/').pop()!,
        )
      const pooled = poolNetns()
      const netnsBefore = await listNetns(NetnsPrefix)
      for (const n of [...podNetns, ...pooled]) expect(netnsBefore).toContain(n)
      expect(new Set(podNetns).size).toBe(uids.length)
      // The host ends of this node's pods and of its pool's entries (other networks on the host have veths of their own).
      // (Read until the two agree: the pool may be refilling or shrinking in the quiet meanwhile.)
      const veths = await waitFor(
        async () => {
          const v = (await links(bridge)).filter((l) => l.startsWith('veth'))
          return v.length === uids.length + poolNetns().length ? v : undefined
        },
        'one veth per pod and per pool entry',
        10_000,
        200,
      )
      // Node.js as its sandbox's PID 1 ignores SIGTERM: a short grace, so the delete does not wait out the default 30 s.
      await kubectl(['delete', '-n', ns, 'deployment/web', 'pod/hp', '--wait=false', '--grace-period=2'])
      await waitFor(async () => (await c.core.listNamespacedPod({namespace: ns})).items.length === 0, 'pods gone', 60_000, 500)
      const left = await listNetns(NetnsPrefix)
      for (const n of podNetns) expect(left).not.toContain(n)
      const seenPool = new Set([...pooled, ...poolNetns()])
      const holder = mountBaseHolder(node.pid)
      expect(holder).toBeDefined()
      expect(await node.stop()).toBe(0)
      // The mount base's holder goes with the node (reaped by the host's init once the node has exited, if not by the node).
      await waitFor(async () => !existsSync(`/proc/${holder}`), 'the mount base holder gone', 5_000, 100)
      // The pool's entries go with the node.
      const leftAfterStop = await listNetns(NetnsPrefix)
      for (const n of seenPool) expect(leftAfterStop).not.toContain(n)
      expect(await links()).not.toContain(bridge)
      expect((await links()).filter((l) => veths.includes(l))).toEqual([])
      expect(existsSync(join(node.stateDir, 'network'))).toBe(false)
      expect(await natRules()).not.toContain('CNI-HOSTPORT')
      expect(await ipForward()).toBe(forwardBefore)
    },
    120_000,
  )
})

/** Without a pod network: the host's ports are shared, and a taken containerPort is said out loud. */
describeHostE2e('host network: a declared containerPort already taken on the host', () => {
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
