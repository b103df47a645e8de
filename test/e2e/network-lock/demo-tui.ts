import {afterAll, expect, test} from '@jest/globals'
import {execa, execaSync} from 'execa'
import {existsSync, mkdirSync, readFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {processEnv} from '../../../src/emulator/runtime/pod/adoption.js'
import {cliPath, E2eEnv} from '../env.mjs'
import {describeHolding, processesMatching, runDir, uniqueName, waitFor} from '../helpers.js'

/** tmux on its own socket, so nothing of a user's tmux is touched. */
const socket = uniqueName('vnode-demo')
const tmux = (args: string[]) => execa('tmux', ['-L', socket, ...args], {reject: false})
let lastScreen = ''
const screen = async () => (lastScreen = (await tmux(['capture-pane', '-p', '-t', 'demo'])).stdout)

/**
 * `npm run demo` (scripts/demo.mjs, after the build) in a 150x40 terminal: its own control plane
 * (state under a temp XDG_STATE_HOME, binaries from the build cache), the sample workload, the dashboard.
 */
describeHolding(['network', 'kubelet-port'])('the demo on a terminal (tmux 150x40)', () => {
  const state = join(runDir(), uniqueName('demo-state'))
  const env = {...process.env, XDG_STATE_HOME: state}
  let shown: {ips: string[]; logs: string} = {ips: [], logs: ''}
  /** Root with bubblewrap, the CNI plugins and iptables: the demo runs with the sandbox, cgroups and the pod network. */
  const capable =
    process.getuid?.() === 0 &&
    execaSync('sh', ['-c', 'command -v bwrap && command -v iptables'], {reject: false}).exitCode === 0 &&
    ['bridge', 'host-local', 'loopback', 'portmap'].every((p) => existsSync(join('/usr/lib/cni', p)))
  afterAll(async () => {
    await tmux(['kill-server'])
    await execa(cliPath(), ['cluster', 'down'], {env, reject: false, timeout: 60_000})
  })

  test('the first screen names the mode; the dashboard draws its first line once; the workload is applied before it takes the screen and shows the mode; q exits 0', async () => {
    mkdirSync(state, {recursive: true})
    const cmd = `XDG_STATE_HOME='${state}' '${process.execPath}' '${resolve('scripts/demo.mjs')}'; echo "EXITED rc=$?"; sleep 120`
    expect((await tmux(['new-session', '-d', '-s', 'demo', '-x', '150', '-y', '40', 'env', '-u', 'CI', 'sh', '-c', cmd])).exitCode).toBe(0)
    // The first screen (doctor, then what the demo will and will not show) names the mode, before anything is built.
    const first = await waitFor(
      async () => {
        const text = await screen()
        return text.includes('demo: nor a remote cluster') ? text : undefined
      },
      () => `the demo's first screen:\n${lastScreen}`,
      60_000,
      100,
    )
    expect(first.split('\n')[0]).toBe('demo: what this host gives a pod (kubectl vnode doctor --host-only):')
    const mode = /^mode: sandbox (\S+), cgroups (\S+), pod network (\S+); walls \S+$/m.exec(first)
    expect(mode).not.toBeNull()
    expect(first).toContain('demo: it will show')
    if (capable) expect(mode!.slice(1)).toEqual(['namespaces', expect.stringMatching(/^v[12]$/), 'on'])
    await waitFor(
      async () => (await screen()).split('\n').filter((l) => /^\S?\s*default\s+hello-\S+\s+1\/1\s+Running/.test(l)).length === 2,
      () => `the two hello pods Running on the dashboard:\n${lastScreen}`,
      180_000,
      500,
    )
    // What the workload shows: an address per pod, the ConfigMap at its path.
    const kubeconfig = join(state, 'kubectl-vnode', 'cluster', 'kubeconfig')
    const demoKubectl = (args: string[]) => execa(join(process.env[E2eEnv.binDir]!, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], {reject: false})
    const ips = (await demoKubectl(['get', 'pods', '-l', 'app=hello', '-o', 'jsonpath={.items[*].status.podIP}'])).stdout.split(' ').filter(Boolean)
    const logs = (await demoKubectl(['logs', '-l', 'app=hello', '--tail', '-1'])).stdout
    shown = {ips, logs}
    // A few redraws (ages, lease) later.
    await new Promise((r) => setTimeout(r, 3_000))
    const lines = (await screen()).split('\n')
    // The demo runs the plugin file as kubectl does: node in its launcher's place, with the launcher's one malloc arena.
    const up = (await processesMatching('vnode-demo')).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('up') && processEnv(pid).XDG_STATE_HOME === state)
    expect(up).toHaveLength(1)
    expect(processEnv(up[0]!).MALLOC_ARENA_MAX).toBe('1')
    // The demo's own cluster: on loopback, or as root on an address of its own device.
    const server = (await demoKubectl(['config', 'view', '-o', 'jsonpath={.clusters[0].cluster.server}'])).stdout.trim()
    expect(server).toMatch(/^https:\/\/(127\.0\.0\.1|198\.1[89]\.\d+\.\d+):\d+$/)
    expect(lines[0]).toMatch(new RegExp(`^vnode-demo on ${server.replace(/\./g, '\\.')} \\(Kubernetes v\\d+\\.\\d+\\.\\d+\\)`))
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
    // The mode again as the node starts, and the node ran in it.
    expect(normal).toContain(`demo: starting vnode-demo in\n${mode![0]}\n`)
    expect(shown.ips).toHaveLength(2)
    if (mode![3] === 'on') expect(new Set(shown.ips).size).toBe(2)
    if (mode![1] === 'namespaces') expect(shown.logs).toContain('the message from /etc/hello/message')
  })

  test('--plan: the first screen alone, naming the mode doctor finds; what it will not show, and how to get it', async () => {
    const planState = join(runDir(), uniqueName('demo-plan'))
    const planEnv = {...process.env, XDG_STATE_HOME: planState}
    const r = await execa(process.execPath, [resolve('scripts/demo.mjs'), '--plan'], {env: planEnv, reject: false, timeout: 60_000})
    expect(r.exitCode).toBe(0)
    // doctor for this host alone predicts the pod network where the host allows it, as the demo asks for it.
    const doctor = JSON.parse((await execa(cliPath(), ['doctor', '--host-only', '-o', 'json'], {env: planEnv, reject: false})).stdout) as {mode: string}
    expect(r.stdout.split('\n')[0]).toBe('demo: what this host gives a pod (kubectl vnode doctor --host-only):')
    expect(r.stdout).toContain(`\n${doctor.mode}\n`)
    expect(r.stdout).toMatch(/^demo: it will show$/m)
    const none = await execa(process.execPath, [resolve('scripts/demo.mjs'), '--plan', '--sandbox', 'none'], {env: planEnv, reject: false, timeout: 60_000})
    expect(none.exitCode).toBe(0)
    expect(none.stdout).toMatch(/^mode: sandbox none, cgroups \S+, pod network off; walls \S+$/m)
    expect(none.stdout).toMatch(/^demo: it will not show$/m)
    expect(none.stdout).toMatch(/^ {2}- no pod sandbox: .*; to get it: drop --sandbox none$/m)
    // Nothing was started.
    expect(existsSync(planState)).toBe(false)
  })
})
