import {describe, expect, test} from '@jest/globals'
import {dirname, join} from 'node:path'
import {readFileSync} from 'node:fs'

// The conformance comparison (test/conformance/compare.mjs) on hand-made
// recordings: what makes a spec fail, and what an excuse may and may not cover.
const Root = join(dirname(new URL(import.meta.url).pathname), '..', '..')
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any
const compare: Any = await import(join(Root, 'test/conformance/compare.mjs'))
const report: Any = await import(join(Root, 'test/conformance/report.mjs'))

const T0 = 1_000_000
const nodes = {kubelet: 'k-node', vnode: 'v-node'}
const namespaces = {kubelet: 'ns-k', vnode: 'ns-v'}

/** A pod object with one container in the given state. */
function pod(phase: string, cs: Any, extra: Any = {}): Any {
  return {
    metadata: {name: 'p', ...extra.metadata},
    status: {phase, hostIP: '10.0.0.1', startTime: 'x', qosClass: 'BestEffort', containerStatuses: [{name: 'c', restartCount: 0, ready: false, image: 'busybox', ...cs}], ...extra.status},
  }
}
const running = pod('Running', {state: {running: {startedAt: 'x'}}, ready: true, started: true})
const exited = (code: number) => pod(code === 0 ? 'Succeeded' : 'Failed', {state: {terminated: {exitCode: code, reason: code === 0 ? 'Completed' : 'Error'}}, started: false})

/** A recording of one spec: each side's states as [seconds after creation, pod], deleted at `deleteAt`, gone `goneAfter` later. */
function side(states: [number, Any][], opts: Any = {}): Any {
  const r: Any = {created: T0, states: states.map(([s, p]) => ({at: T0 + s * 1000, type: 'MODIFIED', pod: p}))}
  if (opts.deleteAt !== undefined) {
    r.deleted = T0 + opts.deleteAt * 1000
    if (opts.goneAfter !== undefined) r.states.push({at: r.deleted + opts.goneAfter * 1000, type: 'DELETED', pod: states.at(-1)![1]})
  }
  if (opts.createError) return {created: T0, states: [], createError: opts.createError}
  if (opts.logs) r.logs = opts.logs
  return r
}

function run(spec: Any, k: Any, v: Any, differences: Any[] = [], extra: Any = {}): Any {
  const rec = {kubelet: {pods: k ? {[spec.name]: k} : {}, events: {}}, vnode: {pods: v ? {[spec.name]: v} : {}, events: {}}, ...extra}
  return compare.compareAll({specs: [spec], rec, nodes, namespaces, differences: compare.validateDifferences(differences)})[0]
}

const spec = {name: 'exit-spec'}
/** The same state on both nodes through the window, then a delete and gone in 1 s. */
const steady = (p: Any) => side([[1, p]], {deleteAt: 50, goneAfter: 1})

/** An excuse for the first seconds of exit codes: the shape of a timing entry. */
const timingExcuse = {
  id: 'first-seconds',
  kind: 'by nature',
  reason: 'the first seconds differ',
  specs: ['exit-spec'],
  paths: ['status containerStatuses.c.state.exitCode', 'status containerStatuses.c.state.reason', 'status phase'],
  window: {phase: 'create', from: 0, to: 6},
}

describe('conformance compare: what fails a spec', () => {
  test('the same states on both nodes are identical', () => {
    const r = run(spec, steady(exited(0)), steady(exited(0)))
    expect(r.diffs).toEqual([])
    expect(r.verdict).toBe('identical')
  })

  test('a steady-state difference (exit 0 against 1 to the end of the window) is not covered by an excuse for the first seconds', () => {
    const r = run(spec, steady(exited(0)), steady(exited(1)), [timingExcuse])
    expect(r.verdict).toBe('different')
    const late = r.diffs.filter((d: Any) => d.path === 'status containerStatuses.c.state.exitCode' && d.at > 6000)
    expect(late.length).toBeGreaterThan(0)
    expect(late.every((d: Any) => d.documented === undefined)).toBe(true)
    // The same difference where it is early only is what the excuse is for.
    const early = run(
      spec,
      side([[1, exited(0)]], {deleteAt: 50, goneAfter: 1}),
      side(
        [
          [1, exited(1)],
          [4, exited(0)],
        ],
        {deleteAt: 50, goneAfter: 1},
      ),
      [timingExcuse],
    )
    expect(early.diffs.filter((d: Any) => d.path.startsWith('status ')).every((d: Any) => d.documented === 'first-seconds')).toBe(true)
  })

  test('the exit code is compared as termination too, which no window covers', () => {
    const r = run(spec, steady(exited(0)), steady(exited(1)), [timingExcuse])
    const t = r.diffs.find((d: Any) => d.path === 'termination containerStatuses.c.state.exitCode')
    expect(t).toMatchObject({kubelet: '0', vnode: '1'})
    expect(t.documented).toBeUndefined()
  })

  test('a create that fails (on one node or both) fails the spec, even with nothing else to compare', () => {
    const both = run(spec, side([], {createError: 'forbidden'}), side([], {createError: 'forbidden'}))
    expect(both.verdict).toBe('failed')
    expect(both.diffs.map((d: Any) => d.path)).toEqual(['run kubelet: create failed', 'run vnode: create failed'])
    expect(report.headline([both])).toBe('conformance: 0/1 identical, 0 identical apart from documented differences, 1 different (1 failed to run)')
    expect(run(spec, steady(running), side([], {createError: 'forbidden'})).verdict).toBe('failed')
  })

  test('a spec without samples on a node fails', () => {
    const r = run(spec, steady(running), {created: T0, states: [], deleted: T0 + 50_000})
    expect(r.verdict).toBe('failed')
    expect(r.diffs.map((d: Any) => d.path)).toContain('run vnode: no samples')
    expect(run(spec, steady(running), undefined).verdict).toBe('failed')
  })

  test('a pod that is never gone after its delete fails', () => {
    const r = run(spec, steady(running), side([[1, running]], {deleteAt: 50}))
    expect(r.verdict).toBe('failed')
    expect(r.diffs.map((d: Any) => d.path)).toContain('run vnode: never gone')
  })

  test('times are compared within a tolerance that grows with the load, and no entry may excuse them', () => {
    const slow = side([[1, running]], {deleteAt: 50, goneAfter: 9})
    expect(run(spec, steady(running), slow).diffs.map((d: Any) => d.path)).toEqual(['time gone'])
    // Load 12 on 2 CPUs: a factor of 6, so 8 s apart is within 5 s x 6.
    const load = {load: [{at: T0 + 10_000, load1: 12}], cpus: 2}
    expect(run(spec, steady(running), slow, [], load).verdict).toBe('identical')
    expect(() => compare.validateDifferences([{...timingExcuse, id: 'late', paths: ['time gone']}])).toThrow(/cannot be excused/)
  })

  test('content: what the container wrote must be what the spec says, on both nodes', () => {
    const content = {name: 'exit-spec', logs: {c: 'a-ab\n'}}
    const ok = run(content, side([[1, exited(0)]], {deleteAt: 50, goneAfter: 1, logs: {c: {text: 'a-ab\n'}}}), side([[1, exited(0)]], {deleteAt: 50, goneAfter: 1, logs: {c: {text: 'a-ab\n'}}}))
    expect(ok.verdict).toBe('identical')
    const bad = run(content, side([[1, exited(0)]], {deleteAt: 50, goneAfter: 1, logs: {c: {text: 'a-ab\n'}}}), side([[1, exited(0)]], {deleteAt: 50, goneAfter: 1, logs: {c: {text: '$(A)-$(B)\n'}}}))
    expect(bad.diffs).toEqual([expect.objectContaining({path: 'content logs.c', vnode: '$(A)-$(B)\n', expected: 'a-ab\n'})])
    expect(bad.verdict).toBe('different')
  })
})

describe('conformance compare: a scoped excuse accepts only its window and values', () => {
  const restarts = (n: number) => pod('Running', {state: {running: {startedAt: 'x'}}, ready: true, started: true, restartCount: n})
  const within1 = {
    id: 'restart-clock',
    kind: 'by nature',
    reason: 'independent clocks',
    specs: ['exit-spec'],
    paths: ['status containerStatuses.c.restartCount', 'status-deleting containerStatuses.c.restartCount'],
    window: [
      {phase: 'create', from: 0, to: 50},
      {phase: 'delete', from: 0, to: 10},
    ],
    values: {within: 1},
  }

  test('restartCount within one passes, two apart does not', () => {
    expect(run(spec, steady(restarts(3)), steady(restarts(4)), [within1]).verdict).toBe('documented')
    expect(run(spec, steady(restarts(3)), steady(restarts(5)), [within1]).verdict).toBe('different')
  })

  test('a window covers its samples only, and not the other phase', () => {
    const narrow = {
      ...within1,
      window: [
        {phase: 'create', from: 0, to: 10},
        {phase: 'delete', from: 0, to: 10},
      ],
    }
    const r = run(spec, steady(restarts(3)), steady(restarts(4)), [narrow])
    expect(r.verdict).toBe('different')
    const created = r.diffs.filter((d: Any) => d.path.startsWith('status '))
    expect(created.filter((d: Any) => d.documented).map((d: Any) => d.at)).toEqual([3000, 6000, 10000])
    expect(created.filter((d: Any) => !d.documented).map((d: Any) => d.at)).toEqual([15000, 20000, 30000, 40000])
    const deleting = {...within1, window: {phase: 'delete', from: 0, to: 50}}
    expect(run(spec, steady(restarts(3)), steady(restarts(4)), [deleting]).verdict).toBe('different')
  })

  test('a value pair covers that pair only', () => {
    const pair = {...timingExcuse, window: {phase: 'create', from: 0, to: 50}, paths: ['status containerStatuses.c.state.exitCode'], values: {pairs: [['0', '1']]}}
    const d = {path: 'status containerStatuses.c.state.exitCode', at: 3000}
    expect(compare.documented([pair], 'exit-spec', {...d, kubelet: '0', vnode: '1'})?.id).toBe('first-seconds')
    expect(compare.documented([pair], 'exit-spec', {...d, kubelet: '0', vnode: '137'})).toBeUndefined()
    expect(compare.documented([pair], 'other-spec', {...d, kubelet: '0', vnode: '1'})).toBeUndefined()
  })

  test('values by path: each path keeps its own relation', () => {
    const e = {
      ...within1,
      paths: ['status containerStatuses.c.state.kind', 'status containerStatuses.c.restartCount'],
      values: {byPath: {'status containerStatuses.c.state.kind': {pairs: [['"terminated"', '"waiting"']]}, 'status containerStatuses.c.restartCount': {within: 1}}},
    }
    const at = {at: 3000}
    expect(compare.documented([e], 'exit-spec', {...at, path: 'status containerStatuses.c.state.kind', kubelet: '"terminated"', vnode: '"waiting"'})?.id).toBe('restart-clock')
    expect(compare.documented([e], 'exit-spec', {...at, path: 'status containerStatuses.c.state.kind', kubelet: '"running"', vnode: '"waiting"'})).toBeUndefined()
    expect(compare.documented([e], 'exit-spec', {...at, path: 'status containerStatuses.c.restartCount', kubelet: '1', vnode: '2'})?.id).toBe('restart-clock')
    expect(compare.documented([e], 'exit-spec', {...at, path: 'status containerStatuses.c.restartCount', kubelet: '1', vnode: '3'})).toBeUndefined()
  })

  test('blanket entries are refused', () => {
    for (const paths of [['status *'], ['status-deleting *'], ['*'], ['event-count *']]) expect(() => compare.validateDifferences([{...timingExcuse, paths}])).toThrow(/blanket/)
    expect(() => compare.validateDifferences([{...timingExcuse, specs: ['*']}])).toThrow(/specs/)
    expect(() => compare.validateDifferences([{...timingExcuse, window: undefined}])).toThrow(/window/)
  })

  test('the entries in differences.json pass the same checks', () => {
    const file = JSON.parse(readFileSync(join(Root, 'test/conformance/differences.json'), 'utf8'))
    expect(() => compare.validateDifferences(file.differences)).not.toThrow()
  })
})
