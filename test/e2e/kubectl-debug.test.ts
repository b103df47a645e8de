import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {rmSync} from 'node:fs'
import {join} from 'node:path'
import {E2eEnv} from './env.mjs'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, testEnv, uniqueName, waitFor} from './helpers.js'

/** kubectl on a terminal: a tmux session of its own (private socket), with a known size. */
class Terminal {
  readonly socket = uniqueName('vnode-tmux')
  constructor(
    readonly cols = 100,
    readonly rows = 30,
  ) {}

  private tmux(args: string[]) {
    return execa('tmux', ['-L', this.socket, ...args], {env: testEnv(), reject: false})
  }

  async start(argv: string[]): Promise<void> {
    const kubectlBin = join(process.env[E2eEnv.binDir]!, 'kubectl')
    const r = await this.tmux([
      'new-session',
      '-d',
      '-s',
      'main',
      '-x',
      String(this.cols),
      '-y',
      String(this.rows),
      [kubectlBin, ...argv].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ') + '; sleep 600',
    ])
    if (r.exitCode !== 0) throw new Error(`tmux: ${r.stderr}`)
  }

  async type(text: string): Promise<void> {
    await this.tmux(['send-keys', '-t', 'main', '-l', text])
    await this.tmux(['send-keys', '-t', 'main', 'Enter'])
  }

  async resize(cols: number, rows: number): Promise<void> {
    await this.tmux(['resize-window', '-t', 'main', '-x', String(cols), '-y', String(rows)])
  }

  async screen(): Promise<string> {
    return (await this.tmux(['capture-pane', '-p', '-t', 'main', '-S', '-200'])).stdout
  }

  async waitScreen(re: RegExp, what: string, timeoutMs = 30_000): Promise<string> {
    let last = ''
    return waitFor(
      async () => {
        last = await this.screen()
        return re.test(last) ? last : undefined
      },
      () => `${what} on the terminal (it shows: ${JSON.stringify(last.trim().split('\n').slice(-10))})`,
      timeoutMs,
      150,
    )
  }

  async close(): Promise<void> {
    await this.tmux(['kill-server'])
    // tmux leaves its socket file behind.
    rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, this.socket), {force: true})
  }
}

/** kubectl run -it, attach -t and kubectl debug (ephemeral containers, --copy-to). */
describeE2e('kubectl: terminals and debug containers', () => {
  const f = new KubectlFixture('kdbg')
  const marker = uniqueName('dbg')
  const terminals: Terminal[] = []
  const terminal = () => {
    const t = new Terminal()
    terminals.push(t)
    return t
  }

  let sandboxed = false

  beforeAll(async () => {
    await f.setUp()
    sandboxed = (await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.metadata.labels.vnode\\.dev/sandbox}'])).stdout === 'namespaces'
    await f.create({
      metadata: {name: 'target'},
      spec: {terminationGracePeriodSeconds: 2, containers: [{name: 'app', image: 'busybox', args: ['sh', '-c', 'echo target-up; while :; do sleep 1; done', marker]}]},
    })
    await f.waitRow('target', (r) => r.status === 'Running', 'Running')
  })
  afterAll(async () => {
    for (const t of terminals) await t.close()
    await f.tearDown()
    await stopAllVnodes()
  })

  test('kubectl run -it: a shell on a terminal of the client size; exit ends the pod; the log keeps the tty output', async () => {
    const t = terminal()
    await t.start(['run', 'shell', '-n', f.ns, `--overrides={"spec":{"nodeName":"${f.nodeName}"}}`, '--image=busybox', '--restart=Never', '-it', '--', 'sh'])
    await t.waitScreen(/If you don't see a command prompt/, 'kubectl attached')
    await t.type(`[ -t 0 ] && [ -t 1 ] && echo on-a-terminal; tty; stty size; echo "ok-$((6*7))-${marker}"`)
    const screen = await t.waitScreen(new RegExp(`ok-42-${marker}`), 'the shell answering')
    expect(screen).toContain('on-a-terminal')
    // bwrap shows the controlling terminal as /dev/console in its fresh /dev; a bare process sees the pty.
    expect(screen).toMatch(sandboxed ? /\/dev\/console/ : /\/dev\/pts\/\d+/)
    expect(screen).toContain(`${t.rows} ${t.cols}`)
    // The client's terminal changes size: kubectl sends it, the container's terminal follows.
    await t.resize(120, 40)
    await new Promise((r) => setTimeout(r, 500))
    await t.type('echo "size-$(stty size)-now"')
    await t.waitScreen(/size-40 120-now/, 'the new size')
    await t.type('exit 0')
    await f.waitRow('shell', (r) => r.status === 'Completed', 'Completed')
    const cs = await f.jsonpath('shell', '{.spec.containers[0].tty}|{.status.containerStatuses[0].state.terminated.exitCode}')
    expect(cs).toBe('true|0')
    // The CRI log of a terminal: its output as stdout, carriage returns included.
    const logs = (await f.logs('shell')).stdout
    expect(logs).toContain(`ok-42-${marker}\r\n`)
    await kubectl(['delete', 'pod', 'shell', '-n', f.ns, '--wait=false'])
    await f.gone('shell')
  })

  test('kubectl debug -it --target: an ephemeral container started on the update, on a terminal, with status, events and logs', async () => {
    const t = terminal()
    await t.start(['debug', '-it', 'target', '-n', f.ns, '--image=busybox', '--target=app', '-c', 'dbg', '--', 'sh'])
    await t.waitScreen(/If you don't see a command prompt/, 'kubectl debug attached')
    await t.type(`echo "debug-$((6*7))-${marker}"; echo "pid1=$(tr -c '[:print:]' ' ' </proc/1/cmdline)"`)
    const screen = await t.waitScreen(new RegExp(`debug-42-${marker}[\\s\\S]*pid1=`), 'the debug shell answering')
    // In a sandbox, --target puts the debug container in the target's PID namespace: its PID 1 is the target's process.
    if (sandboxed) expect(screen).toMatch(new RegExp(`pid1=sh -c .* ${marker}`))
    expect(await f.jsonpath('target', '{.status.ephemeralContainerStatuses[0].name}|{.status.ephemeralContainerStatuses[0].state.running.startedAt}')).toMatch(/^dbg\|\d{4}-/)
    await t.type('exit 3')
    await waitFor(async () => (await f.jsonpath('target', '{.status.ephemeralContainerStatuses[0].state.terminated.exitCode}')) === '3', 'dbg terminated with 3')
    // An ephemeral container is never restarted, and the pod goes on.
    await new Promise((r) => setTimeout(r, 1500))
    expect(await f.jsonpath('target', '{.status.phase}|{.status.ephemeralContainerStatuses[0].restartCount}|{.status.ephemeralContainerStatuses[0].state.terminated.exitCode}')).toBe('Running|0|3')
    expect((await f.logs('target', ['-c', 'dbg'])).stdout).toContain(`debug-42-${marker}`)
    await f.waitDescribe('target', /Normal\s+Started\s+.*Started container dbg/)
    const events = await kubectl(['get', 'events', '-n', f.ns, '--field-selector', 'involvedObject.name=target,reason=Started', '-o', 'jsonpath={.items[*].involvedObject.fieldPath}'])
    expect(events.stdout).toContain('spec.ephemeralContainers{dbg}')
  })

  test('kubectl debug -i without --target, input from a pipe', async () => {
    const r = await kubectl(
      ['debug', '-i', 'target', '-n', f.ns, '--image=busybox', '-c', 'piped', '--', 'sh', '-c', 'read line; echo "got $line"; echo "pid1=$(tr -c "[:print:]" " " </proc/1/cmdline)" >&2'],
      `hello-${marker}\n`,
    )
    expect(r.stdout).toContain(`got hello-${marker}`)
    // Without --target, a PID namespace of its own (in a sandbox): its PID 1 is itself.
    if (sandboxed) expect(r.stderr).toContain('pid1=sh -c read line')
    await waitFor(async () => (await f.jsonpath('target', '{.status.ephemeralContainerStatuses[?(@.name=="piped")].state.terminated.exitCode}')) === '0', 'piped terminated with 0')
    expect((await f.logs('target', ['-c', 'piped'])).stdout).toMatch(new RegExp(`^got hello-${marker}$`, 'm'))
  })

  test('kubectl debug --copy-to: a copy of the pod with the debug container', async () => {
    const r = await kubectl(['debug', 'target', '-n', f.ns, '--copy-to=target-copy', '--same-node', '--image=busybox', '-c', 'dbg', '--', 'sh', '-c', `echo copied-${marker}`])
    expect(r.exitCode).toBe(0)
    // The copy runs the debug container as one of its own (restartPolicy Always: it runs again, as on a kubelet).
    await waitFor(
      async () => (await f.jsonpath('target-copy', '{.status.containerStatuses[?(@.name=="dbg")].lastState.terminated.exitCode}').catch(() => '')) === '0',
      'dbg in the copy to have completed',
    )
    expect((await f.logs('target-copy', ['-c', 'dbg'])).stdout).toBe(`copied-${marker}`)
    expect((await f.logs('target-copy', ['-c', 'app'])).stdout).toBe('target-up')
    expect(await f.jsonpath('target-copy', '{.spec.nodeName}')).toBe(f.nodeName)
    await kubectl(['delete', 'pod', 'target', 'target-copy', '-n', f.ns, '--wait=false'])
    await f.gone('target')
    await f.gone('target-copy')
    await f.noProcess(marker)
  })
})
