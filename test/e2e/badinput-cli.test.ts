import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeE2e, kubeconfigPath, kubectl, runDir, uniqueName, vnode} from './helpers.js'

describeE2e('bad input on the command line: one error line, exit 1, no stack trace', () => {
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
      ['bad node name', ['--kubeconfig', kubeconfigPath(), '--name', 'Not_A_DNS_Name'], /invalid node name/],
      ['bad --label', [...real, '--label', 'noequals'], /invalid --label/],
      ['bad --taint', [...real, '--taint', 'key=value'], /invalid --taint/],
      ['bad --cpu', [...real, '--cpu', 'lots'], /invalid --cpu/],
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
})
