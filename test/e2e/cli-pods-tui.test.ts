import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, startVnode, stopAllVnodes, uniqueName, type VnodeProcess, waitFor} from './helpers.js'

/** tmux on its own socket, so nothing of a user's tmux is touched. */
const socket = uniqueName('vnode-watch')
const tmux = (args: string[]) => execa('tmux', ['-L', socket, ...args], {reject: false})
let lastScreen = ''
/** The visible screen. */
const screen = async () => (lastScreen = (await tmux(['capture-pane', '-p', '-t', 'watch'])).stdout)
/** The visible screen and all the scrollback above it: where piled-up redraws end up. */
const history = async () => (await tmux(['capture-pane', '-p', '-S', '-', '-E', '-', '-t', 'watch'])).stdout

describeE2e('kubectl vnode pods -w on a terminal (tmux): the live table redraws in place', () => {
  let c: Clients
  let vn: VnodeProcess
  const node = uniqueName('watchtui')
  const ns = uniqueName('watchtui')
  const pod = (name: string) => ({
    metadata: {name},
    spec: {nodeName: node, tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}], containers: [{name: 'main', image: 'sleeper', command: ['sleep', '300']}]},
  })
  beforeAll(async () => {
    c = await clients()
    vn = startVnode(node)
    await createNamespace(c.core, ns)
    await vn.ready()
  })
  afterAll(async () => {
    await tmux(['kill-server'])
    await deleteNamespace(c.core, ns)
    await stopAllVnodes()
  })

  /** What the node said last, for a screen that does not come: the table reads the API server, the node writes it. */
  const nodeSide = () => `vnode ${node} said: ${vn.lastOutput(15)}`

  test('with a full screen of earlier output, ages ticking and pods coming and going: one header, one row per pod, the footer last', async () => {
    for (const name of ['alpha', 'beta']) await c.core.createNamespacedPod({namespace: ns, body: pod(name)})
    // The shell's screen is full (the cursor at its bottom), as it is after any earlier command.
    const cmd = `seq 60; KUBECONFIG='${kubeconfigPath()}' '${cliPath()}' pods -n ${ns} -w; echo "EXITED rc=$?"; sleep 60`
    expect((await tmux(['new-session', '-d', '-s', 'watch', '-x', '120', '-y', '30', 'env', '-u', 'CI', 'sh', '-c', cmd])).exitCode).toBe(0)
    await waitFor(
      async () => /watching 2 pods/.test(await screen()) && /alpha\s+1\/1\s+Running/.test(lastScreen) && /beta\s+1\/1\s+Running/.test(lastScreen),
      () => `both pods Running:\n${lastScreen}\n${nodeSide()}`,
      30_000,
      200,
    )
    // Several redraws: the AGE column moves once a second; then a pod comes and one goes.
    await new Promise((r) => setTimeout(r, 4_000))
    await c.core.createNamespacedPod({namespace: ns, body: pod('gamma')})
    await waitFor(
      async () => /watching 3 pods/.test(await screen()) && /gamma\s+1\/1\s+Running/.test(lastScreen),
      () => `gamma Running:\n${lastScreen}\n${nodeSide()}`,
      30_000,
      200,
    )
    await c.core.deleteNamespacedPod({name: 'beta', namespace: ns, gracePeriodSeconds: 0})
    await waitFor(
      async () => /watching 2 pods/.test(await screen()) && !/\bbeta\b/.test(lastScreen),
      () => `beta gone:\n${lastScreen}`,
      30_000,
      200,
    )
    await new Promise((r) => setTimeout(r, 2_000))

    const all = (await history()).split('\n')
    const count = (re: RegExp) => all.filter((l) => re.test(l)).length
    expect({header: count(/^NAME\s+READY\s+STATUS/), alpha: count(/^alpha\s/), beta: count(/^beta\s/), gamma: count(/^gamma\s/), footer: count(/watching \d+ pods/)}).toEqual({
      header: 1,
      alpha: 1,
      beta: 0,
      gamma: 1,
      footer: 1,
    })
    const visible = (await screen()).split('\n').filter((l) => l.trim() !== '')
    expect(visible.slice(-4).map((l) => l.split(/\s+/)[0])).toEqual(['NAME', 'alpha', 'gamma', 'watching'])

    await tmux(['send-keys', '-t', 'watch', 'q'])
    const after = await waitFor(
      async () => (/EXITED rc=\d+/.test(await screen()) ? lastScreen : undefined),
      () => `pods -w to exit:\n${lastScreen}`,
      15_000,
      200,
    )
    expect(after).toContain('EXITED rc=0')
  })
})
