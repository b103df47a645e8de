import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {appendFileSync, mkdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {cliPath} from './env.mjs'
import {clients, type Clients, createNamespace, deleteNamespace, describeE2e, kubeconfigPath, processesMatching, runDir, uniqueName, waitFor} from './helpers.js'

/** tmux on its own socket, so nothing of a user's tmux is touched. */
const socket = uniqueName('vnode-tui')
const tmux = (args: string[]) => execa('tmux', ['-L', socket, ...args], {reject: false})
/** The last screen captured, for failure messages. */
let lastScreen = ''
const screen = async (target: string) => (lastScreen = (await tmux(['capture-pane', '-p', '-t', target])).stdout)

describeE2e('kubectl vnode up on a terminal: the dashboard (tmux)', () => {
  let c: Clients
  const node = uniqueName('clitui')
  beforeAll(async () => {
    c = await clients()
  })
  afterAll(async () => {
    await tmux(['kill-server'])
    await c.core.deleteNode({name: node}).catch(() => undefined)
  })

  test('renders header, table and keys; ? shows help; a pod turns Running and x kills it; q stops the node gracefully and leaves no process', async () => {
    const stateDir = join(runDir(), 'nodes', node)
    mkdirSync(stateDir, {recursive: true})
    const cmd = `KUBECONFIG='${kubeconfigPath()}' '${cliPath()}' up --name ${node} --state-dir '${stateDir}' --port 0; echo "EXITED rc=$?"; sleep 60`
    const started = await tmux(['new-session', '-d', '-s', 'tui', '-x', '120', '-y', '34', 'env', '-u', 'CI', 'sh', '-c', cmd])
    expect(started.exitCode).toBe(0)
    const first = await waitFor(
      async () => {
        const s = await screen('tui')
        return /Ready=True/.test(s) && /q quit/.test(s) ? s : undefined
      },
      () => `the dashboard:\n${lastScreen}`,
      30_000,
      200,
    )
    expect(first).toContain(node)
    expect(first.split('\n')[0]).toMatch(new RegExp(`^${node} on https://.*Kubernetes v\\d+\\.\\d+`))
    // The node's own lines (the namespaces it serves, its mode) go to the event feed, never below the frame.
    await waitFor(
      async () => {
        const lines = (await screen('tui')).split('\n')
        return (
          lines[0].startsWith(`${node} on https://`) && lines.some((l) => /^\d\d:\d\d:\d\d allowed namespaces: every namespace/.test(l)) && lines.some((l) => /^\d\d:\d\d:\d\d mode: sandbox /.test(l))
        )
      },
      () => `the node's lines in the event feed, the title line at the top:\n${lastScreen}`,
      15_000,
      200,
    )
    expect(first).toMatch(/Ready=True\s+MemoryPressure=False\s+DiskPressure=False\s+PIDPressure=False/)
    expect(first).toMatch(/NAMESPACE.?\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+PID\s+CPU\s+MEM/)
    expect(first).toMatch(/pods 0\/110/)
    const registered = await c.core.readNode({name: node})
    expect(registered.status?.conditions?.find((x) => x.type === 'Ready')?.status).toBe('True')
    // Where the API server reaches the kubelet API: the loopback control plane reaches the node itself.
    const endpoint = `${registered.status!.addresses!.find((a) => a.type === 'InternalIP')!.address}:${registered.status!.daemonEndpoints!.kubeletEndpoint!.Port}`
    await waitFor(
      async () =>
        (await screen('tui'))
          .split('\n')
          .map((l) => l.trimEnd())
          .includes(`kubelet direct at ${endpoint}`),
      () => `the kubelet line:\n${lastScreen}`,
      15_000,
      200,
    )
    // The lease line moves on its own (redraws happen without input).
    await waitFor(async () => /lease \d+s ago/.test(await screen('tui')), 'the lease age', 15_000, 200)

    await tmux(['send-keys', '-t', 'tui', '?'])
    await waitFor(async () => /force kill \(grace period 0\)/.test(await screen('tui')), 'the help', 10_000, 100)
    await tmux(['send-keys', '-t', 'tui', 'Escape'])
    await waitFor(async () => !/force kill \(grace period 0\)/.test(await screen('tui')), 'the help to close', 10_000, 100)

    // A pod appears and turns Running; `x` kills it after a confirmation, through the API.
    const ns = uniqueName('tui')
    const marker = uniqueName('tui-marker')
    await createNamespace(c.core, ns)
    try {
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name: 'victim'},
          spec: {
            nodeName: node,
            containers: [{name: 'main', image: 'node', command: ['node', '-e', `process.on('SIGTERM', () => process.exit(0)); console.log('${marker}'); setInterval(() => {}, 1000)`]}],
          },
        },
      })
      await waitFor(
        async () => new RegExp(`${ns}\\s+victim\\s+1/1\\s+Running`).test(await screen('tui')),
        () => `the pod Running on screen:\n${lastScreen}`,
        30_000,
        200,
      )
      expect(await processesMatching(marker)).toHaveLength(1)
      await tmux(['send-keys', '-t', 'tui', 'x'])
      await waitFor(async () => /\by\b/.test(await screen('tui')) && /victim/.test(lastScreen), 'the kill confirmation', 10_000, 100)
      await tmux(['send-keys', '-t', 'tui', 'y'])
      await waitFor(
        async () => {
          try {
            await c.core.readNamespacedPod({name: 'victim', namespace: ns})
            return false
          } catch (error) {
            return (error as {code?: number}).code === 404
          }
        },
        'the pod to be deleted',
        30_000,
        200,
      )
      expect(await processesMatching(marker)).toEqual([])
      // The table row goes (the event feed may still name the pod).
      await waitFor(
        async () => !new RegExp(`${ns}\\s+victim\\s+\\d/1`).test(await screen('tui')),
        () => `the row to go:\n${lastScreen}`,
        10_000,
        200,
      )
    } finally {
      await deleteNamespace(c.core, ns)
    }

    await tmux(['send-keys', '-t', 'tui', 'q'])
    const after = await waitFor(
      async () => {
        const s = await screen('tui')
        return /EXITED rc=\d+/.test(s) ? s : undefined
      },
      () => `up to exit:\n${lastScreen}`,
      30_000,
      200,
    )
    expect(after).toContain('EXITED rc=0')
    // Back on the normal screen, the shutdown is summarised.
    expect(after).toContain(`${node}: marking node NotReady and cordoning it`)
    const n = await c.core.readNode({name: node})
    expect(n.spec?.unschedulable).toBe(true)
    // The tmux server and its shell carry the command text too (with the EXITED marker): only other processes count.
    const left = (await processesMatching(`--name ${node}`)).filter((pid) => !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('EXITED'))
    expect(left).toEqual([])
  })

  test('a line another program writes on the terminal is gone at the next frame: the first line is drawn once, at the top (150x40)', async () => {
    const name = uniqueName('clitui-stray')
    const stateDir = join(runDir(), 'nodes', name)
    mkdirSync(stateDir, {recursive: true})
    const cmd = `KUBECONFIG='${kubeconfigPath()}' '${cliPath()}' up --name ${name} --state-dir '${stateDir}' --port 0; echo "EXITED rc=$?"; sleep 60`
    expect((await tmux(['new-session', '-d', '-s', 'stray', '-x', '150', '-y', '40', 'env', '-u', 'CI', 'sh', '-c', cmd])).exitCode).toBe(0)
    try {
      const header = new RegExp(`^${name} on https://`)
      await waitFor(
        async () => /Ready=True/.test(await screen('stray')) && /q quit/.test(lastScreen),
        () => `the dashboard:\n${lastScreen}`,
        30_000,
        200,
      )
      expect((await screen('stray')).split('\n')[0]).toMatch(header)
      // What a background job (the demo's `kubectl apply` once) does: write on the terminal the dashboard owns.
      const tty = (await tmux(['display-message', '-p', '-t', 'stray', '#{pane_tty}'])).stdout.trim()
      appendFileSync(tty, 'deployment.apps/stray created\n')
      await waitFor(
        async () => {
          const lines = (await screen('stray')).split('\n')
          return header.test(lines[0]) && lines.filter((l) => header.test(l)).length === 1 && !lines.some((l) => l.includes('deployment.apps/stray'))
        },
        () => `the next frames to own the screen again (first line once, at the top; the stray line gone):\n${lastScreen}`,
        10_000,
        200,
      )
      // And it stays so over later redraws (the lease age moves every second).
      const age = /lease (\d+)s ago/.exec(lastScreen)?.[1]
      await waitFor(async () => /lease (\d+)s ago/.exec(await screen('stray'))?.[1] !== age, 'a later redraw', 15_000, 200)
      const lines = lastScreen.split('\n')
      expect(lines[0]).toMatch(header)
      expect(lines.filter((l) => header.test(l))).toHaveLength(1)
    } finally {
      await tmux(['send-keys', '-t', 'stray', 'q'])
      await waitFor(
        async () => /EXITED rc=\d+/.test(await screen('stray')),
        () => `up to exit:\n${lastScreen}`,
        30_000,
        200,
      )
      await c.core.deleteNode({name}).catch(() => undefined)
    }
  })
})
