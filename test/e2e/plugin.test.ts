import {afterAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {cliPath} from './env.mjs'
import {describeE2e, testEnv} from './helpers.js'

const root = join(dirname(cliPath()), '..')
const kubectlBin = () => join(process.env.VNODE_E2E_BIN_DIR!, 'kubectl')

function expectUsage(stdout: string): void {
  expect(stdout).toMatch(/\$ kubectl vnode \[COMMAND\]/)
  for (const cmd of ['up', 'pods', 'kill', 'cluster']) expect(stdout).toMatch(new RegExp(`^\\s+${cmd}\\s`, 'm'))
}

describeE2e('the kubectl plugin entry', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'vnode-pack-'))
  afterAll(() => rmSync(tmp, {recursive: true, force: true}))

  test('with bin/ on PATH, kubectl finds the plugin and `kubectl vnode --help` prints kubectl vnode usage', async () => {
    const env = {...testEnv(), PATH: `${join(root, 'bin')}:/usr/bin:/bin`}
    const list = await execa(kubectlBin(), ['plugin', 'list'], {env, reject: false})
    expect(list.stdout).toContain(join(root, 'bin', 'kubectl-vnode'))
    const help = await execa(kubectlBin(), ['vnode', '--help'], {env})
    expectUsage(help.stdout)
  })

  test('a global install of the packed package gives the same plugin', async () => {
    const pack = await execa('npm', ['pack', '--pack-destination', tmp, '--ignore-scripts'], {cwd: root})
    const tarball = join(tmp, pack.stdout.trim().split('\n').pop()!)
    const prefix = join(tmp, 'global')
    await execa('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], {timeout: 300_000})
    const env = {...testEnv(), PATH: `${join(prefix, 'bin')}:/usr/bin:/bin`}
    const list = await execa(kubectlBin(), ['plugin', 'list'], {env, reject: false})
    expect(list.stdout).toContain(join(prefix, 'bin', 'kubectl-vnode'))
    const help = await execa(kubectlBin(), ['vnode', '--help'], {env})
    expectUsage(help.stdout)
    // The control plane sources travel with the package, so `cluster build` works from an install.
    const status = await execa(join(prefix, 'bin', 'kubectl-vnode'), ['cluster', 'status', '--dir', join(tmp, 'nothing')], {env, reject: false})
    expect(status.stdout).toContain('control plane not running')
  }, 360_000)
})
