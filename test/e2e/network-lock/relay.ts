import {afterAll, beforeAll, expect} from '@jest/globals'
import type {V1Node, V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'
import {request as httpsRequest} from 'node:https'
import {get} from 'node:http'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {connect as tlsConnect, type TLSSocket} from 'node:tls'
import {dirname, join} from 'node:path'
import {E2eEnv} from '../env.mjs'
import {dial, freePort, hasBwrap, hasIptables, python, Reject, relayFlags} from '../relay-helpers.js'
import {expectInteractiveShell} from '../tty-exec.js'
import {
  clients,
  type Clients,
  clusterWithServices,
  createNamespace,
  kubeconfigPath,
  deleteNamespace,
  describeHostE2e,
  kubectl,
  runDir,
  startVnode,
  stopAllVnodes,
  testEnv,
  testWhen,
  topNode,
  uniqueName,
  vnode,
  type VnodeProcess,
  waitFor,
} from '../helpers.js'

/**
 * `up --relay`: a node whose kubelet API the API server cannot reach, served
 * through a relay pod on another node of the same cluster. The relay runs on
 * a second vnode node (its image python:3-alpine is the host's python3, by
 * the built-in image map's base images); the node under test listens on
 * loopback only, which the API server never dials, so every kubectl request
 * that reaches it came through the relay.
 */

const NODE = process.execPath
const kubectlBin = () => join(process.env[E2eEnv.binDir]!, 'kubectl')

const when = testWhen(python && hasBwrap, 'the relay pod runs the host python3 (with asyncio) in a pod sandbox: python3, bwrap and root are needed')

function httpGet(port: number, path: string): Promise<{status: number; body: string}> {
  return new Promise((resolve, reject) => {
    const req = get({host: '127.0.0.1', port, path, agent: false, timeout: 15_000}, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
  })
}

/** A request without credentials to an address and port, as anyone on the pod network could send it. */
function anonymous(host: string, port: number, path: string): Promise<{status: number; body: string; sans: string}> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({host, port, path, rejectUnauthorized: false, agent: false, timeout: 10_000}, (res) => {
      const sans = (res.socket as TLSSocket).getPeerCertificate().subjectaltname ?? ''
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body, sans}))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end()
  })
}

/** Whether the certificate served at host:port verifies against the suite cluster's CA for that address (as an API server with --kubelet-certificate-authority checks it). */
function verifiesAgainstClusterCa(host: string, port: number): Promise<string> {
  const ca = readFileSync(join(dirname(kubeconfigPath()), 'pki', 'ca.crt'))
  return new Promise((resolve, reject) => {
    const s = tlsConnect({host, port, ca, rejectUnauthorized: false, timeout: 10_000})
    s.once('secureConnect', () => {
      resolve(s.authorized ? 'verified' : String(s.authorizationError))
      s.destroy()
    })
    s.once('timeout', () => s.destroy(new Error('timeout')))
    s.once('error', reject)
  })
}

describeHostE2e('up --relay: the kubelet API through a relay pod on another node', () => {
  let c: Clients
  let host: VnodeProcess
  let node: VnodeProcess
  let relayPort = 0
  let kubeletPort = 0
  let webPort = 0
  const hostName = uniqueName('relay-host')
  const name = uniqueName('relayed')
  const ns = uniqueName('relay')
  const relayNs = uniqueName('vnode-system')
  const relayPod = `vnode-relay-${name}`
  const k = (...args: string[]) => kubectl(['-n', ns, ...args])
  const readNode = (): Promise<V1Node> => c.core.readNode({name})
  const internalIP = (n: V1Node) => n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address

  const pod = (podName: string, command: string[]): V1Pod => ({
    metadata: {name: podName, namespace: ns},
    spec: {nodeName: name, automountServiceAccountToken: false, terminationGracePeriodSeconds: 2, containers: [{name: podName, image: 'vnode/node', command}]},
  })
  // A container with stdin (stdinOnce): what it reads, upper-cased, then a line when its stdin closes.
  const upper: V1Pod = {
    metadata: {name: 'upper', namespace: ns},
    spec: {
      nodeName: name,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 2,
      restartPolicy: 'Never',
      containers: [
        {
          name: 'upper',
          image: 'vnode/node',
          stdin: true,
          stdinOnce: true,
          command: [NODE, '-e', `process.stdin.on('data',d=>process.stdout.write(String(d).toUpperCase()));process.stdin.on('end',()=>console.log('STDIN CLOSED'))`],
        },
      ],
    },
  }

  beforeAll(async () => {
    // Every test here is when(...) (or whenFirewalled, which needs more), on the same condition: skipped without it, failed under CI.
    if (!python || !hasBwrap) return
    c = await clients()
    await createNamespace(c.core, ns)
    // The relay's node: untainted, so the scheduler may place the relay there, and labelled for its selector.
    host = startVnode(hostName, ['--sandbox', 'namespaces', '--no-default-taint', '--label', `relay-host=${hostName}`])
    await host.ready()
    relayPort = await freePort()
    const tunnelPort = await freePort('127.0.0.1')
    node = startVnode(name, relayFlags(relayNs, relayPort, tunnelPort, hostName))
    await node.ready(120_000)
    kubeletPort = Number(/port (\d+)\)/.exec(node.lines.find((l) => l.step === 'register')!.message)![1])
    webPort = await freePort('127.0.0.1')
    const pods = [
      pod('app', [NODE, '-e', `process.on('SIGTERM',()=>process.exit(0));let i=0;setInterval(()=>console.log('tick '+(++i)),150)`]),
      pod('web', [NODE, '-e', `process.on('SIGTERM',()=>process.exit(0));require('http').createServer((q,s)=>s.end('hello from web '+q.url)).listen(${webPort},'127.0.0.1')`]),
      upper,
    ]
    for (const p of pods) await c.core.createNamespacedPod({namespace: ns, body: p})
    for (const p of pods) {
      await waitFor(async () => (await c.core.readNamespacedPod({name: p.metadata!.name!, namespace: ns})).status?.containerStatuses?.[0]?.state?.running, `${p.metadata!.name} running`, 30_000)
    }
  }, 200_000)

  const rejects: Reject[] = []
  afterAll(async () => {
    for (const r of rejects) r.remove()
    await deleteNamespace(c?.core, ns)
    await stopAllVnodes()
    await c?.core.deleteNamespace({name: relayNs}).catch(() => undefined)
    for (const n of [name, hostName]) await c?.core.deleteNode({name: n}).catch(() => undefined)
  }, 90_000)

  when('the node publishes the relay pod: its IP as InternalIP, its port, no Hostname; its own kubelet port takes no outside connection', async () => {
    const relay = await c.core.readNamespacedPod({name: relayPod, namespace: relayNs})
    expect(relay.spec?.nodeName).toBe(hostName)
    expect(relay.spec?.automountServiceAccountToken).toBe(false)
    expect(relay.spec?.containers[0].image).toBe('python:3-alpine')
    const n = await readNode()
    expect(internalIP(n)).toBe(relay.status?.podIP)
    expect(n.status?.addresses?.map((a) => a.type)).toEqual(['InternalIP'])
    expect(n.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(relayPort)
    expect(n.metadata?.annotations?.['vnode.dev/relay']).toBe(`${relayNs}/${relayPod}`)
    expect(node.lines.some((l) => l.step === 'relay' && l.message === 'kubelet endpoint: relay (--relay on)')).toBe(true)
    const cm = await c.core.readNamespacedConfigMap({name: relayPod, namespace: relayNs})
    expect(cm.data?.['relay.py']).toContain('vnode relay')
    // The kubelet server of the node under test listens on loopback only: from the host's address, nothing.
    expect(await dial(relay.status!.podIP!, kubeletPort)).toBe('ECONNREFUSED')
    expect(await dial('127.0.0.1', kubeletPort)).toBe('connected')
  })

  when('kubectl logs -f follows through the relay', async () => {
    const p = execa(kubectlBin(), ['-n', ns, 'logs', '-f', 'app'], {env: testEnv(), reject: false, buffer: false})
    let out = ''
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    try {
      await waitFor(
        () => (out.match(/tick \d+/g) ?? []).length >= 5,
        () => `five ticks followed (${out})`,
        20_000,
      )
    } finally {
      p.kill('SIGINT')
      await p
    }
    expect(out).toMatch(/^tick 1\ntick 2\ntick 3\n/)
  })

  when('kubectl exec runs in the pod, with stdin, through the relay', async () => {
    expect(await k('exec', 'app', '--', 'echo', 'through', 'the relay')).toMatchObject({exitCode: 0, stdout: 'through the relay'})
    expect(await kubectl(['-n', ns, 'exec', '-i', 'app', '--', 'tr', 'a-z', 'A-Z'], 'hello relay\n')).toMatchObject({exitCode: 0, stdout: 'HELLO RELAY'})
    expect((await k('exec', 'app', '--', 'sh', '-c', 'exit 7')).exitCode).toBe(7)
  })

  when(
    'kubectl exec -it gets a terminal through the relay: a tty, job control, and the exit code',
    async () => {
      await expectInteractiveShell(kubectlBin(), ns, 'app')
    },
    60_000,
  )

  when('kubectl attach follows the output, and attach -i feeds a stdin container, through the relay', async () => {
    const before = Math.max(...(await k('logs', 'app')).stdout.split('\n').map((l) => Number(l.split(' ')[1]) || 0))
    const p = execa(kubectlBin(), ['-n', ns, 'attach', 'app'], {env: testEnv(), reject: false, buffer: false})
    let out = ''
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    try {
      const later = await waitFor(
        () => {
          const ticks = out.split('\n').flatMap((l) => (/^tick \d+$/.test(l) ? [Number(l.split(' ')[1])] : []))
          return ticks.length >= 3 ? ticks : undefined
        },
        () => `three ticks through attach (${JSON.stringify(out)})`,
        20_000,
      )
      // Written after attach joined, not the log replayed.
      expect(Math.min(...later)).toBeGreaterThan(before)
    } finally {
      p.kill('SIGINT')
      await p
    }
    const r = await kubectl(['-n', ns, 'attach', '-i', 'upper'], 'hello\nattached relay\n')
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toContain('HELLO\nATTACHED RELAY\nSTDIN CLOSED')
  })

  when('kubectl cp copies a file into the pod and back out, through the relay', async () => {
    const dir = mkdtempSync(join(runDir(), 'relay-cp-'))
    const remote = `/tmp/${uniqueName('relay-cp')}`
    try {
      const content = `copied through the relay ${uniqueName('x')}\n`.repeat(2000)
      writeFileSync(join(dir, 'in.txt'), content)
      expect(await k('cp', join(dir, 'in.txt'), `app:${remote}`)).toMatchObject({exitCode: 0})
      expect((await k('exec', 'app', '--', 'wc', '-c', remote)).stdout).toBe(`${Buffer.byteLength(content)} ${remote}`)
      expect(await k('cp', `app:${remote}`, join(dir, 'out.txt'))).toMatchObject({exitCode: 0})
      expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe(content)
    } finally {
      await k('exec', 'app', '--', 'rm', '-f', remote)
      rmSync(dir, {recursive: true, force: true})
    }
  })

  when('kubectl port-forward reaches the pod through the relay', async () => {
    const p = execa(kubectlBin(), ['-n', ns, 'port-forward', 'pod/web', `:${webPort}`], {env: testEnv(), reject: false, buffer: false})
    let out = ''
    let err = ''
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()))
    try {
      const local = Number(
        await waitFor(
          () => /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out)?.[1],
          () => `port-forward to start (${out} ${err})`,
          20_000,
        ),
      )
      const [a, b] = await Promise.all([httpGet(local, '/one'), httpGet(local, '/two')])
      expect(a).toEqual({status: 200, body: 'hello from web /one'})
      expect(b).toEqual({status: 200, body: 'hello from web /two'})
    } finally {
      p.kill('SIGINT')
      await p
    }
  })

  when('nodes/proxy stats/summary comes through the relay', async () => {
    const r = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/stats/summary`])
    expect(r.exitCode).toBe(0)
    const summary = JSON.parse(r.stdout) as {node: {nodeName: string}; pods: Array<{podRef: {name: string}}>}
    expect(summary.node.nodeName).toBe(name)
    const names = summary.pods.map((p) => p.podRef.name)
    expect(names).toEqual(expect.arrayContaining(['app', 'web']))
    // upper has exited once attach -i closed its stdin.
    expect(names.filter((n) => !['app', 'upper', 'web'].includes(n))).toEqual([])
    // What metrics-server scrapes for kubectl top (that path end to end: the describe below).
    const m = await kubectl(['get', '--raw', `/api/v1/nodes/${name}/proxy/metrics/resource`])
    expect(m.exitCode).toBe(0)
    expect(m.stdout).toMatch(new RegExp(`^container_cpu_usage_seconds_total\\{namespace="${ns}",pod="app",container="app"\\} \\d`, 'm'))
  })

  when('a request without credentials through the relay is refused by vnode (401), over TLS that names the relay IP', async () => {
    const ip = internalIP(await readNode())!
    const r = await anonymous(ip, relayPort, '/pods')
    expect(r.status).toBe(401)
    expect(r.body).toBe('Unauthorized')
    expect(r.sans).toContain(`IP Address:${ip}`)
    // The certificate the cluster signed (a kubelet-serving CSR) covers the relay's IP.
    expect(await verifiesAgainstClusterCa(ip, relayPort)).toBe('verified')
  })

  when("kubectl vnode pods -o wide shows each pod's kubelet endpoint: the relay pod for the relayed node, direct for the other", async () => {
    const r = await vnode(['pods', '-A', '-o', 'wide'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout.split('\n')[0]).toMatch(/\sWALLS\s+NETWORK\s+ENDPOINT$/)
    expect(r.stdout).toMatch(new RegExp(`^${ns}\\s+app\\s+1/1\\s+Running\\s.*\\srelay ${relayNs}/${relayPod}$`, 'm'))
    expect(r.stdout).toMatch(new RegExp(`^${relayNs}\\s+${relayPod}\\s+1/1\\s+Running\\s.*\\s${hostName}\\s.*\\sdirect$`, 'm'))
  })

  when('the relay pod deleted: vnode makes it again and kubectl exec and logs work within 30 s', async () => {
    const before = (await c.core.readNamespacedPod({name: relayPod, namespace: relayNs})).metadata!.uid
    await c.core.deleteNamespacedPod({name: relayPod, namespace: relayNs, gracePeriodSeconds: 0})
    const started = Date.now()
    await waitFor(
      async () => {
        const r = await k('exec', 'app', '--', 'echo', 'back')
        return r.exitCode === 0 && r.stdout === 'back'
      },
      'exec through the new relay',
      30_000,
      500,
    )
    const logs = await k('logs', 'app', '--tail', '2')
    expect(logs.exitCode).toBe(0)
    expect(logs.stdout).toMatch(/^tick \d+\ntick \d+$/)
    expect(Date.now() - started).toBeLessThan(30_000)
    const after = await waitFor(async () => {
      const p = await c.core.readNamespacedPod({name: relayPod, namespace: relayNs})
      return p.status?.podIP ? p : undefined
    }, 'the new relay pod with an IP')
    expect(after.metadata!.uid).not.toBe(before)
    expect(internalIP(await readNode())).toBe(after.status?.podIP)
    // A new relay IP: a new certificate for it, signed by the cluster.
    expect(await verifiesAgainstClusterCa(after.status!.podIP!, relayPort)).toBe('verified')
  })

  when('--relay auto on the loopback cluster stays direct: the API server reaches the node', async () => {
    const line = host.lines.find((l) => l.step === 'relay')
    expect(line?.message).toMatch(/^kubelet endpoint: direct at \S+:\d+: the API server reaches it \(the kubelet API answered 200\)$/)
    const n = await c.core.readNode({name: hostName})
    // Direct nodes publish their IP only too: no Hostname address the API server would dial first.
    expect(n.status?.addresses?.map((a) => a.type)).toEqual(['InternalIP'])
    expect(n.metadata?.annotations?.['vnode.dev/relay']).toBeUndefined()
  })

  const whenFirewalled = testWhen(python && hasBwrap && hasIptables, 'python3, bwrap, root and iptables are needed (the firewall is an iptables reject)')
  whenFirewalled(
    '--relay auto behind a firewall picks the relay, says why, and kubectl exec goes through it',
    async () => {
      const firewalled = uniqueName('walled')
      const hostIP = internalIP(await c.core.readNode({name: hostName}))!
      const port = await freePort()
      const reject = new Reject(hostIP, port, `vnode-relay-test-${firewalled}`)
      rejects.push(reject)
      reject.add()
      try {
        expect(await dial(hostIP, port)).toBe('ECONNREFUSED')
        const [pub, tunnel] = [await freePort(), await freePort('127.0.0.1')]
        const args = ['--port', String(port), '--relay-namespace', relayNs, '--relay-port', String(pub), '--relay-tunnel-port', String(tunnel), '--relay-node-selector', `relay-host=${hostName}`]
        const walled = startVnode(firewalled, args)
        await walled.ready(60_000)
        const line = walled.lines.find((l) => l.step === 'relay')?.message
        expect(line).toMatch(new RegExp(`^kubelet endpoint: relay: the API server cannot reach ${hostIP.replaceAll('.', '\\.')}:${port} \\(.*connection refused.*\\)$`))
        const n = await c.core.readNode({name: firewalled})
        expect(n.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(pub)
        expect(n.status?.addresses?.map((a) => a.type)).toEqual(['InternalIP'])
        await c.core.createNamespacedPod({
          namespace: ns,
          body: {
            ...pod('walled-app', [NODE, '-e', `process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{},1000)`]),
            spec: {
              ...pod('x', []).spec!,
              nodeName: firewalled,
              containers: [{name: 'walled-app', image: 'vnode/node', command: [NODE, '-e', `process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{},1000)`]}],
            },
          },
        })
        await waitFor(async () => (await c.core.readNamespacedPod({name: 'walled-app', namespace: ns})).status?.containerStatuses?.[0]?.state?.running, 'walled-app running', 30_000)
        expect(await k('exec', 'walled-app', '--', 'echo', 'past the firewall')).toMatchObject({exitCode: 0, stdout: 'past the firewall'})
        await c.core.deleteNamespacedPod({name: 'walled-app', namespace: ns, gracePeriodSeconds: 0})
        expect(await walled.stop()).toBe(0)
        await expect(c.core.readNamespacedPod({name: `vnode-relay-${firewalled}`, namespace: relayNs})).rejects.toMatchObject({code: 404})
      } finally {
        reject.remove()
        await c.core.deleteNode({name: firewalled}).catch(() => undefined)
      }
    },
    150_000,
  )

  when('stopping the node deletes the relay pod and its ConfigMap', async () => {
    expect(await node.stop()).toBe(0)
    await expect(c.core.readNamespacedPod({name: relayPod, namespace: relayNs})).rejects.toMatchObject({code: 404})
    await expect(c.core.readNamespacedConfigMap({name: relayPod, namespace: relayNs})).rejects.toMatchObject({code: 404})
  })
})

/**
 * `kubectl top pod` of a relayed node, on a cluster of this describe's own
 * with its services (the suite's cluster has no metrics-server):
 * metrics-server scrapes the node at its published InternalIP and port,
 * which are the relay pod's, so every reading came through the relay.
 */
describeHostE2e('up --relay: kubectl top pod through the relay', () => {
  const relayHost = uniqueName('top-host')
  // The fixture's node hosts the relay pod (labelled for its selector, untainted so the scheduler may place it there).
  const f = python && hasBwrap ? clusterWithServices('relaytop', ['--sandbox', 'namespaces', '--no-default-taint', '--label', `relay-host=${relayHost}`]) : undefined
  const relayed = uniqueName('top-relayed')
  const relayNs = uniqueName('vnode-system')

  afterAll(async () => {
    await stopAllVnodes()
    await f?.c?.core.deleteNamespace({name: relayNs}).catch(() => undefined)
    await f?.c?.core.deleteNode({name: relayed}).catch(() => undefined)
  }, 60_000)

  when(
    'metrics-server scrapes the relayed node through the relay pod, and kubectl top pod lists its pod',
    async () => {
      const {c, ns} = f!
      const node = startVnode(relayed, relayFlags(relayNs, await freePort(), await freePort('127.0.0.1'), relayHost))
      await node.ready(120_000)
      const relay = await c.core.readNamespacedPod({name: `vnode-relay-${relayed}`, namespace: relayNs})
      const published = await c.core.readNode({name: relayed})
      expect(published.status?.addresses).toEqual([{type: 'InternalIP', address: relay.status?.podIP}])
      const burn = `process.on('SIGTERM',()=>process.exit(0));setInterval(()=>{let x=0;for(let i=0;i<2e5;i++)x+=i},100)`
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'busy'},
          spec: {nodeName: relayed, automountServiceAccountToken: false, terminationGracePeriodSeconds: 2, containers: [{name: 'busy', image: 'vnode/node', command: [NODE, '-e', burn]}]},
        },
      })
      let last = ''
      // metrics-server reports a pod after two scrapes of its node (--metric-resolution=15s), once its APIService is Available.
      const top = await waitFor(
        async () => {
          const r = await kubectl(['top', 'pod', '-n', ns, '--no-headers'])
          last = r.stdout + r.stderr
          return r.exitCode === 0 && /^busy\s/m.test(r.stdout) ? r.stdout : undefined
        },
        () => `kubectl top pod to list busy (last: ${last})`,
        180_000,
        2000,
      )
      expect(top).toMatch(/^busy\s+\d+m\s+\d+Mi\s*$/m)
      const nodeTop = await topNode(relayed)
      expect(nodeTop).toMatch(new RegExp(`^${relayed}\\s+\\d+m\\s+\\d+%\\s+\\d+Mi\\s+\\d+%`))
      // The node's own kubelet port took none of it: it listens on loopback only.
      const kubeletPort = Number(/port (\d+)\)/.exec(node.lines.find((l) => l.step === 'register')!.message)![1])
      expect(await dial(relay.status!.podIP!, kubeletPort)).toBe('ECONNREFUSED')
    },
    300_000,
  )
})
