import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdirSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:net'
import {join} from 'node:path'
import {execa} from 'execa'
import {cliPath} from './env.mjs'
import {describeHolding, kubeconfigPath, kubectl, runDir, startVnode, testEnv, uniqueName, vnode, waitFor} from './helpers.js'

/** Holds a TCP port on all addresses; resolves undefined when someone else holds it already. */
function holdPort(port: number): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(undefined) : reject(e)))
    srv.listen(port, '0.0.0.0', () => resolve(srv))
  })
}

/** Runs fn with the port of a server on loopback that accepts TCP connections and never says a word. */
async function withSilentServer(fn: (port: number) => Promise<void>): Promise<void> {
  const silent = createServer(() => undefined)
  const sockets = new Set<import('node:net').Socket>()
  silent.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))))
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
  try {
    await fn((silent.address() as {port: number}).port)
  } finally {
    for (const s of sockets) s.destroy()
    silent.close()
  }
}

describeHolding(['kubelet-port'])('bad input on the command line: one error line, exit 1, no stack trace', () => {
  const dir = join(runDir(), uniqueName('badcli'))
  const node = uniqueName('badcli')
  const file = (name: string, text: string) => {
    const p = join(dir, name)
    writeFileSync(p, text)
    return p
  }
  const kc = (server: string) => `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
  let cases: Array<[string, string[], RegExp]> = []

  beforeAll(() => {
    mkdirSync(dir, {recursive: true})
    const real = ['--kubeconfig', kubeconfigPath(), '--name', node, '--port', '0']
    cases = [
      ['malformed kubeconfig', ['--kubeconfig', file('bad.yaml', 'garbage: [\n  - {\n')], /cannot load kubeconfig/],
      ['kubeconfig that is not a kubeconfig', ['--kubeconfig', file('list.yaml', '- just\n- a list\n')], /no current cluster/],
      ['missing kubeconfig', ['--kubeconfig', join(dir, 'absent.yaml')], /does not exist/],
      ['unknown context', ['--kubeconfig', kubeconfigPath(), '--context', 'no-such-context'], /context "no-such-context" does not exist/],
      ['unreachable server', ['--kubeconfig', file('unreachable.yaml', kc('https://127.0.0.1:1'))], /cannot reach the API server at https:\/\/127\.0\.0\.1:1/],
      ['server that is not a URL', ['--kubeconfig', file('url.yaml', kc('::not a url::'))], /cannot reach the API server/],
      ['unknown flag', [...real, '--bogus'], /Nonexistent flag: --bogus/],
      ['non-numeric --pods', [...real, '--pods', 'many'], /--pods/],
      ['--port out of range', [...real, '--port', '70000'], /--port/],
      ['bad --output', [...real, '-o', 'yaml'], /plain, json/],
      ['bad --request-timeout', [...real, '--request-timeout', 'soon'], /invalid --request-timeout "soon"/],
      ['bad node name', ['--kubeconfig', kubeconfigPath(), '--name', 'Not_A_DNS_Name'], /invalid node name/],
      ['bad --label', [...real, '--label', 'noequals'], /invalid --label/],
      ['bad --relay-node-selector', [...real, '--relay-node-selector', 'noequals'], /^error: invalid --relay-node-selector "noequals": expected key=value$/],
      ['bad --taint', [...real, '--taint', 'key=value'], /invalid --taint/],
      ['bad --cpu', [...real, '--cpu', 'lots'], /invalid --cpu/],
      ['--crash-loop-backoff without a cap', [...real, '--crash-loop-backoff', '10s'], /^error: invalid --crash-loop-backoff "10s": expected INITIAL:MAX/],
      ['--crash-loop-backoff with its first delay above its cap', [...real, '--crash-loop-backoff', '5m:10s'], /^error: invalid --crash-loop-backoff "5m:10s"/],
      ['--crash-loop-backoff of no delay', [...real, '--crash-loop-backoff', '0s:1m'], /^error: invalid --crash-loop-backoff "0s:1m"/],
      ['--crash-loop-backoff not durations', [...real, '--crash-loop-backoff', 'soon:later'], /^error: invalid --crash-loop-backoff "soon:later"/],
      ['missing --images file', [...real, '--images', join(dir, 'absent-images.yaml')], /invalid --images/],
      ['malformed --images file', [...real, '--images', file('images.yaml', 'images: [\n')], /invalid --images/],
      ['--state-dir that is a file', [...real, '--state-dir', file('state-file', 'x')], /state/i],
      ['bad --client-ca-file', [...real, '--client-ca-file', file('ca.pem', 'not a certificate')], /client-ca|certificate|CA/i],
    ]
  })
  afterAll(async () => {
    await kubectl(['delete', 'node', node, '--ignore-not-found'])
  })

  test('every case fails cleanly', async () => {
    expect(cases.length).toBeGreaterThanOrEqual(15)
    const bad: string[] = []
    for (const [what, args, message] of cases) {
      const r = await vnode(['up', '--no-tui', ...args], {timeout: 30_000})
      const lines = r.stderr.split('\n').filter(Boolean)
      const ok = r.exitCode === 1 && lines.length === 1 && /^error: /.test(lines[0]) && message.test(lines[0]) && !/\n\s+at /.test(r.stdout + r.stderr)
      if (!ok) bad.push(`${what}: exit ${r.exitCode}, stderr ${JSON.stringify(r.stderr.slice(0, 400))}`)
    }
    expect(bad).toEqual([])
  })

  test('an explicit --port that is taken: `error: port N is in use`, exit 1, no node; only the default port falls back to a free one', async () => {
    const held = (await holdPort(0))!
    const port = (held.address() as {port: number}).port
    const name = uniqueName('taken')
    try {
      const r = await vnode(['up', '--no-tui', '--kubeconfig', kubeconfigPath(), '--name', name, '--port', String(port), '--state-dir', join(dir, name)], {timeout: 30_000})
      expect({exitCode: r.exitCode, stderr: r.stderr.trim()}).toEqual({exitCode: 1, stderr: `error: port ${port} is in use`})
      expect((await kubectl(['get', 'node', name])).exitCode).not.toBe(0)
    } finally {
      held.close()
    }

    // The default port (10250), taken by us or by someone else: a free one instead, as before.
    const defaultHeld = await holdPort(10250)
    const fallback = uniqueName('dflt')
    const child = execa(cliPath(), ['up', '--no-tui', '-o', 'json', '--name', fallback, '--rm', '--state-dir', join(dir, fallback)], {
      env: testEnv(),
      reject: false,
      buffer: false,
      forceKillAfterDelay: false,
    })
    try {
      let out = ''
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
      const registered = await waitFor(
        () => /registered \(.*port (\d+)\)/.exec(out)?.[1],
        () => `the register step (up printed ${out.slice(-400)})`,
        30_000,
        50,
      )
      expect(Number(registered)).toBeGreaterThan(0)
      expect(Number(registered)).not.toBe(10250)
    } finally {
      defaultHeld?.close()
      child.kill('SIGTERM')
      expect((await child).exitCode).toBe(0)
    }
  })

  test('--request-timeout bounds the requests of admission-policy too: a server that accepts and never answers fails it in time', async () => {
    await withSilentServer(async (port) => {
      const silentKc = file('silent-policy.yaml', kc(`https://127.0.0.1:${port}`))
      // --remove starts with the admissionregistration API, install with the core API and then authentication's.
      for (const args of [['--remove'], ['--allow', 'alice']]) {
        const started = Date.now()
        const r = await vnode(['admission-policy', 'some-node', ...args, '--kubeconfig', silentKc, '--request-timeout', '1s'], {timeout: 30_000})
        expect(r.exitCode).toBe(1)
        // kubectl's words for a transport failure, on one line.
        expect(r.stderr.trim()).toMatch(new RegExp(`^Unable to connect to the server 127\\.0\\.0\\.1:${port}: no answer within 1\\.0s \\(--request-timeout\\)$`))
        expect(Date.now() - started).toBeLessThan(15_000)
      }
    })
  })

  test('--request-timeout bounds each API request of up: a server that accepts and never answers fails it in time; a real one runs', async () => {
    await withSilentServer(async (port) => {
      const started = Date.now()
      const r = await vnode(['up', '--no-tui', '--kubeconfig', file('silent.yaml', kc(`https://127.0.0.1:${port}`)), '--name', uniqueName('silent'), '--request-timeout', '1s'], {timeout: 30_000})
      expect(r.exitCode).toBe(1)
      expect(r.stderr.trim()).toMatch(new RegExp(`^error: cannot reach the API server at https://127\\.0\\.0\\.1:${port}: no answer within --request-timeout$`))
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
      expect(Date.now() - started).toBeLessThan(15_000)
    })
    const p = startVnode(uniqueName('rto'), ['--request-timeout', '10s', '--rm'])
    await p.ready()
    expect(await p.stop()).toBe(0)
  })
})
