import {afterAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {mkdirSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {cliPath} from './env.mjs'
import {describeE2e, runDir, uniqueName, waitFor} from './helpers.js'

/** tmux on its own socket, so nothing of a user's tmux is touched. */
const socket = uniqueName('vnode-demo')
const tmux = (args: string[]) => execa('tmux', ['-L', socket, ...args], {reject: false})
let lastScreen = ''
const screen = async () => (lastScreen = (await tmux(['capture-pane', '-p', '-t', 'demo'])).stdout)

/**
 * `npm run demo` (scripts/demo.mjs, after the build) in a 150x40 terminal: its own control plane
 * (state under a temp XDG_STATE_HOME, binaries from the build cache), the sample workload, the dashboard.
 */
describeE2e('the demo on a terminal (tmux 150x40)', () => {
  const state = join(runDir(), uniqueName('demo-state'))
  const env = {...process.env, XDG_STATE_HOME: state}
  afterAll(async () => {
    await tmux(['kill-server'])
    await execa(cliPath(), ['cluster', 'down'], {env, reject: false, timeout: 60_000})
  })

  test('the dashboard draws its first line once; the workload is applied before it takes the screen; q exits 0', async () => {
    mkdirSync(state, {recursive: true})
    const cmd = `XDG_STATE_HOME='${state}' '${process.execPath}' '${resolve('scripts/demo.mjs')}'; echo "EXITED rc=$?"; sleep 120`
    expect((await tmux(['new-session', '-d', '-s', 'demo', '-x', '150', '-y', '40', 'env', '-u', 'CI', 'sh', '-c', cmd])).exitCode).toBe(0)
    await waitFor(
      async () => (await screen()).split('\n').filter((l) => /^\S?\s*default\s+hello-\S+\s+1\/1\s+Running/.test(l)).length === 2,
      () => `the two hello pods Running on the dashboard:\n${lastScreen}`,
      180_000,
      500,
    )
    // A few redraws (ages, lease) later.
    await new Promise((r) => setTimeout(r, 3_000))
    const lines = (await screen()).split('\n')
    expect(lines[0]).toMatch(/^vnode-demo on https:\/\/127\.0\.0\.1:\d+ \(Kubernetes v\d+\.\d+\.\d+\)/)
    expect(lines.filter((l) => /^vnode-demo on /.test(l))).toHaveLength(1)
    expect(lines.filter((l) => /deployment\.apps\/hello/.test(l))).toEqual([])

    await tmux(['send-keys', '-t', 'demo', 'q'])
    const after = await waitFor(
      async () => (/EXITED rc=\d+/.test(await screen()) ? lastScreen : undefined),
      () => `the demo to exit:\n${lastScreen}`,
      60_000,
      300,
    )
    expect(after).toContain('EXITED rc=0')
    // Back on the normal screen: the apply came before the node started, the shutdown after.
    const normal = (await tmux(['capture-pane', '-p', '-S', '-', '-E', '-', '-t', 'demo'])).stdout
    const applied = normal.search(/deployment\.apps\/hello (created|configured|unchanged)/)
    expect(applied).toBeGreaterThan(normal.indexOf('control plane ready at'))
    expect(applied).toBeLessThan(normal.indexOf('vnode-demo: marking node NotReady and cordoning it'))
  })
})
