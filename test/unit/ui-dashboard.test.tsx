import './fixtures/force-color.js'
import {afterEach, beforeAll, beforeEach, describe, expect, test} from '@jest/globals'
import {DashboardStore} from '../../src/ui/dashboard/store.js'
import {fit, layoutColumns, visibleWindow} from '../../src/ui/dashboard/Table.js'
import {FakeFeed, nodeView, pod} from './fixtures/fake-feed.js'
import type {SandboxPoolFigures} from '../../src/ui/dashboard/feed.js'

// Ink and the components load one module at a time (parallel ESM graph links can fail under jest).
let render: typeof import('ink-testing-library').render
let Dashboard: typeof import('../../src/ui/dashboard/Dashboard.js').Dashboard
let Header: typeof import('../../src/ui/dashboard/Header.js').Header
let PodTable: typeof import('../../src/ui/dashboard/PodTable.js').PodTable
beforeAll(async () => {
  render = (await import('ink-testing-library')).render
  Dashboard = (await import('../../src/ui/dashboard/Dashboard.js')).Dashboard
  Header = (await import('../../src/ui/dashboard/Header.js')).Header
  PodTable = (await import('../../src/ui/dashboard/PodTable.js')).PodTable
})

const tick = (ms = 120) => new Promise((r) => setTimeout(r, ms))

/** Waits until the frame satisfies the check (Ink parses keys and redraws asynchronously). */
async function until(frame: () => string | undefined, check: (f: string) => boolean, what: string, timeoutMs = 3000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const f = frame() ?? ''
    if (check(f)) return f
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last frame:\n${plain(f)}`)
    await tick(20)
  }
}
const ESC = '\u001b'
const DOWN = '\u001b[B'

// Colour codes are not what these tests look at.
const plain = (s: string | undefined) => (s ?? '').replace(/\u001b\[[0-9;]*m/g, '')

describe('Header', () => {
  test('shows the node, server and version, coloured conditions, lease age, uptime, pods and requests', async () => {
    const feed = new FakeFeed()
    feed.snapshot = nodeView()
    feed.podList = [pod('a', {phase: 'Running', cpu: '500m', memory: '256Mi'})]
    const store = new DashboardStore(feed, {nodeName: 'dev-laptop'}).start()
    try {
      const {lastFrame} = render(<Header model={store.getSnapshot()} />)
      const raw = lastFrame()!
      const f = plain(raw)
      expect(f).toContain('dev-laptop')
      expect(f).toContain('https://127.0.0.1:6443')
      expect(f).toContain('Kubernetes v1.34.4')
      expect(f).toMatch(/Ready=True\s+MemoryPressure=False\s+DiskPressure=True\s+PIDPressure=False/)
      expect(f).toMatch(/lease 3s ago/)
      expect(f).toMatch(/up 65s/) // kubectl's HumanDuration keeps seconds below 2 minutes
      expect(f).toMatch(/pods 1\/110/)
      expect(f).toMatch(/cpu req 500m\/4/)
      expect(f).toMatch(/mem req 256Mi\/8\.0Gi/)
      // Ready=True green (32), DiskPressure=True red (31).
      expect(raw).toMatch(/\u001b\[32mReady=True/)
      expect(raw).toMatch(/\u001b\[31mDiskPressure=True/)
    } finally {
      store.dispose()
    }
  })

  test("shows where the API server reaches the kubelet API: direct at the node's address, then the relay once the node is annotated with one", async () => {
    const feed = new FakeFeed()
    feed.snapshot = nodeView({kubeletEndpoint: '192.0.2.2:10250'})
    const store = new DashboardStore(feed, {nodeName: 'dev-laptop'}).start()
    try {
      expect(plain(render(<Header model={store.getSnapshot()} />).lastFrame()).split('\n')[3]).toBe('kubelet direct at 192.0.2.2:10250')
      feed.emit('node', nodeView({kubeletEndpoint: '10.244.1.7:10250', annotations: {'vnode.dev/relay': 'vnode-system/vnode-relay-dev-laptop'}}))
      await tick(150)
      expect(plain(render(<Header model={store.getSnapshot()} />).lastFrame()).split('\n')[3]).toBe('kubelet relay vnode-system/vnode-relay-dev-laptop at 10.244.1.7:10250')
    } finally {
      store.dispose()
    }
  })

  test('shows the warm pool (ready/target, its cap) once the node has one, read at each frame; nothing without one', async () => {
    const feed = new FakeFeed()
    feed.snapshot = nodeView({annotations: {'vnode.dev/pod-network': 'pod'}})
    const store = new DashboardStore(feed, {nodeName: 'dev-laptop'}).start()
    try {
      expect(plain(render(<Header model={store.getSnapshot()} />).lastFrame())).not.toContain('pool')
      let ready = 1
      ;(feed as unknown as {pool: () => SandboxPoolFigures}).pool = () => ({ready, making: 0, target: 4, floor: 1, cap: 16, hits: 0, misses: 0, failures: 0, broken: 0})
      feed.emit('node', feed.snapshot)
      await tick(150)
      expect(plain(render(<Header model={store.getSnapshot()} />).lastFrame())).toMatch(/network pod {2}pool 1\/4 max 16/)
      ready = 3
      feed.emit('node', feed.snapshot)
      await tick(150)
      expect(plain(render(<Header model={store.getSnapshot()} />).lastFrame())).toMatch(/pool 3\/4 max 16/)
    } finally {
      store.dispose()
    }
  })

  test('before registration it shows the latest startup step instead of conditions', () => {
    const feed = new FakeFeed()
    const store = new DashboardStore(feed, {nodeName: 'n1'}).start()
    try {
      feed.emit('step', 'connect', 'connected to https://x (Kubernetes v1.34.4)')
      return tick(150).then(() => {
        const {lastFrame} = render(<Header model={store.getSnapshot()} />)
        expect(plain(lastFrame())).toContain('connected to https://x')
      })
    } finally {
      setTimeout(() => store.dispose(), 200)
    }
  })
})

describe('PodTable', () => {
  test("kubectl's columns plus PID, CPU, MEM; STATUS by kubectl's printer; rows coloured by state; names shrink to fit", () => {
    const feed = new FakeFeed()
    feed.podList = [
      pod('web-7d9f8c6b5-abcde', {phase: 'Running', restarts: 2}),
      pod('db', {phase: 'Running', waiting: 'CrashLoopBackOff', ready: false}),
      pod('old', {phase: 'Running', deleting: true}),
    ]
    const store = new DashboardStore(feed, {nodeName: 'n'}).start()
    try {
      const {lastFrame} = render(<PodTable model={store.getSnapshot()} selected={0} width={80} height={10} />)
      const raw = lastFrame()!
      const lines = plain(raw).split('\n')
      expect(lines[0]).toMatch(/^ {2}NAMESPACE↑?\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+PID\s+CPU\s+MEM/)
      expect(lines.find((l) => l.includes('db'))).toMatch(/0\/1\s+CrashLoopBackOff/)
      expect(lines.find((l) => l.includes('old'))).toContain('Terminating')
      expect(lines.every((l) => l.length <= 80)).toBe(true)
      expect(raw).toMatch(/\u001b\[31m[^\n]*CrashLoopBackOff/) // red
      expect(raw).toMatch(/\u001b\[35m[^\n]*Terminating/) // magenta
    } finally {
      store.dispose()
    }
  })

  test('layout helpers: flexible columns shrink first; text is cut with an ellipsis; the window keeps the selection visible', () => {
    const cols = [{title: 'NAMESPACE', flex: true}, {title: 'NAME', flex: true}, {title: 'STATUS'}]
    const rows = [{key: '1', tone: 'ok' as const, cells: ['a-very-long-namespace', 'a-very-long-pod-name-indeed', 'Running']}]
    const w = layoutColumns(cols, rows, 40)
    expect(w[2]).toBe(7)
    expect(w.reduce((a, b) => a + b, 0) + 4).toBeLessThanOrEqual(40)
    expect(fit('abcdefgh', 5)).toBe('abcd…')
    expect(fit('ab', 4, 'right')).toBe('  ab')
    expect(visibleWindow(100, 0, 10)).toEqual([0, 10])
    expect(visibleWindow(100, 50, 10)).toEqual([45, 55])
    expect(visibleWindow(100, 99, 10)).toEqual([90, 100])
  })
})

describe('Dashboard keys (fake feed)', () => {
  let feed: FakeFeed
  let store: DashboardStore
  let deleted: {namespace: string; name: string; force: boolean}[]
  let quits: number
  const actions = {
    deletePod: async (namespace: string, name: string, o: {force: boolean}) => {
      deleted.push({namespace, name, force: o.force})
    },
    quit: () => {
      quits++
    },
  }
  beforeEach(() => {
    feed = new FakeFeed()
    feed.snapshot = nodeView()
    feed.podList = [pod('alpha', {phase: 'Running'}), pod('beta', {phase: 'Running'}), pod('gamma', {phase: 'Pending'})]
    store = new DashboardStore(feed, {nodeName: 'dev-laptop', redrawIntervalMs: 10}).start()
    deleted = []
    quits = 0
  })
  afterEach(() => store.dispose())

  const selectedLine = (frame: string | undefined) =>
    plain(frame)
      .split('\n')
      .find((l) => l.startsWith('› '))

  test('j/k and arrows move the selection; x asks for confirmation and y deletes through the actions (graceful)', async () => {
    const ui = render(<Dashboard store={store} actions={actions} />)
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('alpha') ?? false, 'alpha selected')
    ui.stdin.write('j')
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('beta') ?? false, 'beta selected')
    ui.stdin.write(DOWN)
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('gamma') ?? false, 'gamma selected')
    ui.stdin.write('k')
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('beta') ?? false, 'beta selected')
    ui.stdin.write('x')
    await until(ui.lastFrame, (f) => plain(f).includes('Kill pod default/beta? (y/N)'), 'Kill pod default/beta? (y/N)')
    expect(deleted).toEqual([])
    ui.stdin.write('y')
    await tick()
    expect(deleted).toEqual([{namespace: 'default', name: 'beta', force: false}])
    expect(plain(ui.lastFrame())).toContain('kill requested: default/beta')
    ui.unmount()
  })

  test('X asks for a force kill; any other key cancels; nothing is deleted', async () => {
    const ui = render(<Dashboard store={store} actions={actions} />)
    await tick()
    ui.stdin.write('X')
    await until(ui.lastFrame, (f) => plain(f).includes('Force kill (grace period 0) pod default/alpha? (y/N)'), 'Force kill (grace period 0) pod default/alpha? (y/N)')
    ui.stdin.write('n')
    await tick()
    expect(deleted).toEqual([])
    expect(plain(ui.lastFrame())).toContain('kill cancelled')
    ui.stdin.write('X')
    await tick()
    ui.stdin.write('y')
    await tick()
    expect(deleted).toEqual([{namespace: 'default', name: 'alpha', force: true}])
    ui.unmount()
  })

  test('the selection follows the pod when the order changes', async () => {
    const ui = render(<Dashboard store={store} actions={actions} />)
    await tick()
    ui.stdin.write('j') // beta
    await tick()
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('beta') ?? false, 'beta selected')
    store.setSort('namespace', true) // reversed: gamma, beta, alpha
    await until(ui.lastFrame, (f) => /gamma[\s\S]*beta[\s\S]*alpha/.test(plain(f)), 'the reversed order')
    expect(selectedLine(ui.lastFrame())).toContain('beta')
    feed.emit('pod', pod('aaa-first', {phase: 'Running'}))
    await until(ui.lastFrame, (f) => plain(f).includes('aaa-first'), 'the new pod')
    expect(selectedLine(ui.lastFrame())).toContain('beta')
    ui.unmount()
  })

  test('enter shows details (containers, state, events); esc goes back; ? shows help', async () => {
    const p = pod('web', {phase: 'Running', namespace: 'a'})
    p.spec!.containers[0].readinessProbe = {httpGet: {path: '/ready', port: 8080 as never}, periodSeconds: 5}
    p.status!.containerStatuses![0].restartCount = 1
    p.status!.containerStatuses![0].lastState = {terminated: {exitCode: 137, reason: 'OOMKilled'}}
    feed.emit('pod', p)
    feed.emit('event', {type: 'Warning', reason: 'BackOff', message: 'Back-off restarting failed container', object: {kind: 'Pod', name: 'web', uid: p.metadata!.uid}, count: 3, time: new Date()})
    const ui = render(<Dashboard store={store} actions={actions} />)
    await until(ui.lastFrame, (f) => plain(f).includes(' a  '), 'the web pod of namespace a')
    ui.stdin.write('k') // namespace "a" sorts first; the selection started on the first row shown
    await until(ui.lastFrame, (f) => selectedLine(f)?.includes('web') ?? false, 'web selected')
    ui.stdin.write('\r')
    const f = plain(await until(ui.lastFrame, (x) => plain(x).includes('Last State'), 'the details pane'))
    expect(f).toContain('a/web')
    expect(f).toMatch(/Last State: Terminated: exit code 137 \(OOMKilled\)/)
    expect(f).toContain('Readiness: http-get http://:8080/ready')
    expect(f).toContain('BackOff: Back-off restarting failed container (x3)')
    ui.stdin.write(ESC)
    await until(ui.lastFrame, (f) => !plain(f).includes('Last State'), 'the details pane to close')
    expect(plain(ui.lastFrame())).toContain('EVENTS')
    ui.stdin.write('?')
    await until(ui.lastFrame, (f) => plain(f).includes('force kill (grace period 0)'), 'force kill (grace period 0)')
    ui.unmount()
  })

  test('q asks the node to stop once and shows the shutdown progress from the feed', async () => {
    const ui = render(<Dashboard store={store} actions={actions} />)
    await tick()
    ui.stdin.write('q')
    await tick()
    expect(quits).toBe(1)
    feed.emit('stopping', 'marking node NotReady and cordoning it')
    await tick()
    const f = plain(ui.lastFrame())
    expect(f).toContain('Shutting down node dev-laptop')
    expect(f).toContain('marking node NotReady and cordoning it')
    ui.stdin.write('x') // keys other than ctrl-c do nothing now
    await tick()
    expect(plain(ui.lastFrame())).not.toContain('Kill pod')
    ui.unmount()
  })

  test('the layout follows a terminal resize', async () => {
    const ui = render(<Dashboard store={store} actions={actions} />)
    await tick()
    const stdout = ui.stdout as unknown as NodeJS.WriteStream
    let columns = 50
    Object.defineProperty(stdout, 'columns', {get: () => columns, configurable: true})
    stdout.emit('resize')
    await tick()
    const lines = plain(ui.lastFrame()).split('\n')
    expect(lines.every((l) => l.length <= 50)).toBe(true)
    columns = 160
    stdout.emit('resize')
    await tick()
    expect(plain(ui.lastFrame())).toMatch(/NAMESPACE.?\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+PID\s+CPU\s+MEM/)
    ui.unmount()
  })
})
