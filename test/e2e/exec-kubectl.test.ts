import {afterAll, beforeAll, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {execa, type ResultPromise} from 'execa'
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {get} from 'node:http'
import {request as httpsRequest} from 'node:https'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {
  clients,
  createNamespace,
  deleteNamespace,
  describeE2e,
  kubectl,
  processesMatching,
  runDir,
  serverPort,
  startVnode,
  stopAllVnodes,
  testEnv,
  type Clients,
  type VnodeProcess,
  uniqueName,
  waitFor,
} from './helpers.js'

const NODE = process.execPath
const kubectlBin = () => join(process.env[E2eEnv.binDir]!, 'kubectl')

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

/** An upgrade request straight to the node's kubelet port; resolves with the status line's code. */
function directUpgrade(port: number, path: string, token: string): Promise<{status: number; body: string}> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: '127.0.0.1',
      port,
      path,
      method: 'POST',
      rejectUnauthorized: false,
      agent: false,
      timeout: 10_000,
      headers: {authorization: `Bearer ${token}`, connection: 'Upgrade', upgrade: 'SPDY/3.1', 'x-stream-protocol-version': 'v4.channel.k8s.io'},
    })
    req.on('upgrade', (res, socket) => {
      socket.destroy()
      resolve({status: res.statusCode ?? 0, body: ''})
    })
    req.on('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end()
  })
}

describeE2e('kubectl exec, attach and port-forward on a vnode', () => {
  let c: Clients
  let node: VnodeProcess
  let kubeletPort = 0
  let webPort = 0
  const name = uniqueName('xnode')
  const ns = uniqueName('xns')
  const k = (...args: string[]) => kubectl(['-n', ns, ...args])

  const pod = (podName: string, container: Record<string, unknown>, restartPolicy = 'Always'): V1Pod => ({
    metadata: {name: podName, namespace: ns},
    spec: {nodeName: name, restartPolicy, automountServiceAccountToken: false, terminationGracePeriodSeconds: 2, containers: [{name: podName, image: 'vnode/node', ...container}]},
  })

  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
    node = startVnode(name)
    await node.ready()
    webPort = await serverPort()
    const pods = [
      pod('app', {command: [NODE, '-e', `let i=0;setInterval(()=>console.log('tick '+(++i)),150)`], env: [{name: 'FOO', value: 'bar'}]}),
      pod(
        'upper',
        {
          stdin: true,
          stdinOnce: true,
          command: [NODE, '-e', `process.stdin.on('data',d=>process.stdout.write(String(d).toUpperCase()));process.stdin.on('end',()=>console.log('STDIN CLOSED'))`],
        },
        'Never',
      ),
      pod('web', {
        command: [NODE, '-e', `require('http').createServer((q,s)=>setTimeout(()=>s.end('hello from web '+q.url),300)).listen(${webPort},'127.0.0.1')`],
      }),
    ]
    for (const p of pods) await waitFor(() => c.core.createNamespacedPod({namespace: ns, body: p}), `create ${p.metadata!.name}`, 20_000, 300)
    for (const p of pods) {
      await waitFor(async () => (await c.core.readNamespacedPod({name: p.metadata!.name!, namespace: ns})).status?.containerStatuses?.[0]?.state?.running, `${p.metadata!.name} running`, 30_000)
    }
    const n = await c.core.readNode({name})
    kubeletPort = n.status!.daemonEndpoints!.kubeletEndpoint!.Port
  })

  afterAll(async () => {
    await deleteNamespace(c?.core, ns)
    if (c) {
      const rbac = c.kc.makeApiClient(c.lib.RbacAuthorizationV1Api)
      await rbac.deleteClusterRole({name: `${ns}-proxy`}).catch(() => undefined)
      await rbac.deleteClusterRoleBinding({name: `${ns}-proxy`}).catch(() => undefined)
    }
    await stopAllVnodes()
    await c?.core.deleteNode({name}).catch(() => undefined)
  })

  test('exec returns stdout, stderr and the exit code, in the container env and working directory', async () => {
    const ok = await k('exec', 'app', '--', 'echo', 'hi', 'there')
    expect(ok).toMatchObject({exitCode: 0, stdout: 'hi there'})
    const r = await k('exec', 'app', '--', 'sh', '-c', 'echo "$FOO"; pwd; echo "$VNODE_VOLUME_ROOT"; echo oops >&2; exit 3')
    expect(r.exitCode).toBe(3)
    const [foo, cwd, root] = r.stdout.split('\n')
    expect(foo).toBe('bar')
    expect(root).toContain(`/roots/app`)
    expect(cwd).toBe(root)
    expect(r.stderr).toContain('oops')
    expect(r.stderr).toContain('command terminated with exit code 3')
    // kubectl's SPDY fallback reaches the node the same way.
    const spdy = await execa(kubectlBin(), ['-n', ns, 'exec', 'app', '--', 'sh', '-c', 'exit 5'], {env: {...testEnv(), KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false'}, reject: false})
    expect(spdy.exitCode).toBe(5)
    expect(spdy.stderr).toContain('command terminated with exit code 5')
    const missing = await k('exec', 'app', '--', 'no-such-command')
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toContain('exec: "no-such-command": executable file not found in $PATH')
  })

  test('exec -i passes piped stdin and sees its end', async () => {
    const r = await kubectl(['-n', ns, 'exec', '-i', 'app', '--', 'sh', '-c', 'tr a-z A-Z; echo END'], 'hello\nworld\n')
    expect(r).toMatchObject({exitCode: 0, stdout: 'HELLO\nWORLD\nEND'})
  })

  test('exec -it runs under a pseudo-terminal of the client size and follows resizes', async () => {
    const sock = uniqueName('tmux')
    const rcFile = join(mkdtempSync(join(runDir(), 'tty-')), 'rc')
    const tmux = (...args: string[]) => execa('tmux', ['-L', sock, ...args], {env: testEnv()})
    const screen = async () => (await tmux('capture-pane', '-p', '-t', 's')).stdout
    try {
      await tmux('new-session', '-d', '-s', 's', '-x', '100', '-y', '30', `${kubectlBin()} -n ${ns} exec -it app -- sh; echo rc=$? > ${rcFile}; sleep 30`)
      await waitFor(async () => (await screen()).includes('$') || (await screen()).includes('#'), 'a shell prompt', 20_000)
      await tmux('send-keys', '-t', 's', 'tty; stty size; echo mark-$((6*7))', 'Enter')
      const first = await waitFor(async () => ((await screen()).includes('mark-42') ? screen() : undefined), 'the first answers', 15_000)
      expect(first).toMatch(/\/dev\/pts\/\d+/)
      expect(first).toContain('30 100')
      await tmux('resize-window', '-t', 's', '-x', '120', '-y', '40')
      await new Promise((r) => setTimeout(r, 500))
      await tmux('send-keys', '-t', 's', 'stty size; echo mark-$((7*7))', 'Enter')
      const second = await waitFor(async () => ((await screen()).includes('mark-49') ? screen() : undefined), 'the answers after resize', 15_000)
      expect(second).toContain('40 120')
      await tmux('send-keys', '-t', 's', 'exit 7', 'Enter')
      const rc = await waitFor(() => existsSync(rcFile) && readFileSync(rcFile, 'utf8').trim(), 'kubectl to exit', 15_000)
      expect(rc).toBe('rc=7')
    } finally {
      await tmux('kill-server').catch(() => undefined)
    }
  })

  test('a client that goes away takes its exec process with it', async () => {
    // The shell computes the sleep's argument, so only the exec'd process (not kubectl's argv) carries it.
    const secs = 20_000 + Math.floor(Math.random() * 10_000)
    const child = execa(kubectlBin(), ['-n', ns, 'exec', 'app', '--', 'sh', '-c', `exec sleep $((${secs} + 1))`], {env: testEnv(), reject: false})
    const pids = await waitFor(
      async () => {
        const found = await processesMatching(`sleep ${secs + 1}`)
        return found.length > 0 ? found : undefined
      },
      'the exec process',
      20_000,
    )
    expect(readFileSync(`/proc/${pids[0]}/cmdline`, 'utf8').split('\0')[0]).toBe('sleep')
    child.kill('SIGKILL')
    await child
    await waitFor(async () => (await processesMatching(`sleep ${secs + 1}`)).length === 0, 'the exec process to be killed', 20_000)
  })

  test('attach shows output written after it joined; attach -i feeds a stdin container until stdinOnce closes it', async () => {
    const before = Math.max(...(await k('logs', 'app')).stdout.split('\n').map((l) => Number(l.split(' ')[1]) || 0))
    let attach: ResultPromise | undefined
    let out = ''
    try {
      attach = execa(kubectlBin(), ['-n', ns, 'attach', 'app'], {env: testEnv(), reject: false, buffer: false})
      attach.stdout!.on('data', (d: Buffer) => (out += d.toString()))
      const later = await waitFor(
        () => {
          const ticks = out
            .split('\n')
            .filter((l) => l.startsWith('tick '))
            .map((l) => Number(l.split(' ')[1]))
          return ticks.length >= 3 ? ticks : undefined
        },
        () => `three ticks through attach (got ${JSON.stringify(out)})`,
        20_000,
      )
      expect(Math.min(...later)).toBeGreaterThan(before)
    } finally {
      attach?.kill('SIGINT')
      await attach
    }
    // stdinOnce: the container sees EOF when the attached client closes its input, and exits; the attach ends with it.
    const r = await kubectl(['-n', ns, 'attach', '-i', 'upper'], 'hello\nattached world\n')
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toContain('HELLO\nATTACHED WORLD\nSTDIN CLOSED')
    expect((await k('logs', 'upper')).stdout).toBe('HELLO\nATTACHED WORLD\nSTDIN CLOSED')
  })

  test('port-forward reaches the pod port, two connections at once; a port nothing listens on is reported', async () => {
    const forward = async (remote: number) => {
      const p = execa(kubectlBin(), ['-n', ns, 'port-forward', 'pod/web', `:${remote}`], {env: testEnv(), reject: false, buffer: false})
      let out = ''
      let err = ''
      p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
      p.stderr!.on('data', (d: Buffer) => (err += d.toString()))
      const local = await waitFor(
        () => /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out)?.[1],
        () => `port-forward to start (${out} ${err})`,
        20_000,
      )
      return {p, local: Number(local), stderr: () => err}
    }
    const ok = await forward(webPort)
    try {
      const [a, b] = await Promise.all([httpGet(ok.local, '/one'), httpGet(ok.local, '/two')])
      expect(a).toEqual({status: 200, body: 'hello from web /one'})
      expect(b).toEqual({status: 200, body: 'hello from web /two'})
      expect(await httpGet(ok.local, '/three')).toEqual({status: 200, body: 'hello from web /three'})
    } finally {
      ok.p.kill('SIGINT')
      await ok.p
    }
    const closed = await serverPort()
    const bad = await forward(closed)
    try {
      await expect(httpGet(bad.local, '/')).rejects.toThrow()
      await waitFor(
        () => bad.stderr().includes(`an error occurred forwarding ${bad.local} -> ${closed}`),
        () => `the error (${bad.stderr()})`,
        15_000,
      )
      expect(bad.stderr()).toContain(`dial tcp4 127.0.0.1:${closed}: connect: connection refused`)
    } finally {
      bad.p.kill('SIGINT')
      await bad.p
    }
  })

  test('on the kubelet port, exec, attach and portForward need nodes/proxy', async () => {
    for (const sa of ['noaccess', 'proxier']) await c.core.createNamespacedServiceAccount({namespace: ns, body: {metadata: {name: sa}}})
    const rbac = c.kc.makeApiClient(c.lib.RbacAuthorizationV1Api)
    await rbac.createClusterRole({body: {metadata: {name: `${ns}-proxy`}, rules: [{apiGroups: [''], resources: ['nodes/proxy'], verbs: ['create', 'get']}]}})
    await rbac.createClusterRoleBinding({
      body: {
        metadata: {name: `${ns}-proxy`},
        roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${ns}-proxy`},
        subjects: [{kind: 'ServiceAccount', name: 'proxier', namespace: ns}],
      },
    })
    const token = async (sa: string) => (await kubectl(['create', 'token', sa, '-n', ns])).stdout.trim()
    const denied = await token('noaccess')
    for (const path of [`/exec/${ns}/app/app?command=true&output=1`, `/attach/${ns}/app/app?output=1`, `/portForward/${ns}/web`]) {
      const r = await directUpgrade(kubeletPort, path, denied)
      expect(r.status).toBe(403)
      expect(r.body).toContain(`Forbidden (user=system:serviceaccount:${ns}:noaccess, verb=create, resource=nodes, subresource(s)=[proxy])`)
    }
    const allowed = await token('proxier')
    await waitFor(async () => (await directUpgrade(kubeletPort, `/exec/${ns}/app/app?command=true&output=1`, allowed)).status === 101, 'the upgrade with nodes/proxy', 20_000, 500)
    // A pod the node does not run is the kubelet's 404, after authorization.
    expect(await directUpgrade(kubeletPort, `/exec/${ns}/nope/app?command=true&output=1`, allowed)).toEqual({status: 404, body: 'pod does not exist\n'})
  })
})
