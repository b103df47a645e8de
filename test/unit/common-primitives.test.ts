import {RealClock} from '../../src/common/clock.js'
import {afterEach, beforeEach, describe, expect, jest, test} from '@jest/globals'
import {mkdir, mkdtemp, chmod, writeFile, stat, lstat, readFile, symlink} from 'node:fs/promises'
import {spawnSync} from 'node:child_process'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {V1Pod} from '@kubernetes/client-node'
import {WakeTimer} from '../../src/common/wake-timer.js'
import {SerialRunner} from '../../src/common/serial-runner.js'
import {removeTree} from '../../src/common/remove-tree.js'
import {allContainerStatuses, allContainers, isTerminalPhase, podKey, podKeyOf, podRef} from '../../src/common/pods.js'

describe('a wake timer: its deadline only moves earlier', () => {
  beforeEach(() => {
    jest.useFakeTimers({now: 1_000_000})
  })
  afterEach(() => {
    jest.useRealTimers()
  })

  test('fires once at its deadline, then has none', () => {
    const fired: number[] = []
    const t = new WakeTimer(() => fired.push(Date.now()))
    expect(t.at).toBe(Infinity)
    t.wakeBy(Date.now() + 100)
    expect(t.at).toBe(1_000_100)
    jest.advanceTimersByTime(99)
    expect(fired).toEqual([])
    jest.advanceTimersByTime(1)
    expect(fired).toEqual([1_000_100])
    expect(t.at).toBe(Infinity)
    jest.advanceTimersByTime(10_000)
    expect(fired).toHaveLength(1)
  })

  test('a later deadline changes nothing; a sooner one moves it', () => {
    const fired: number[] = []
    const t = new WakeTimer(() => fired.push(Date.now()))
    t.wakeBy(Date.now() + 500)
    t.wakeBy(Date.now() + 800)
    expect(t.at).toBe(1_000_500)
    t.wakeBy(1_000_200)
    expect(t.at).toBe(1_000_200)
    jest.advanceTimersByTime(1000)
    expect(fired).toEqual([1_000_200])
  })

  test('a deadline already past fires on the next tick; cancel leaves none', () => {
    const fired: number[] = []
    const t = new WakeTimer(() => fired.push(Date.now()))
    t.wakeBy(0)
    jest.advanceTimersByTime(0)
    expect(fired).toHaveLength(1)
    t.wakeBy(Date.now() + 50)
    t.cancel()
    expect(t.at).toBe(Infinity)
    jest.advanceTimersByTime(100)
    expect(fired).toHaveLength(1)
    t.wakeBy(Date.now() + 70)
    expect(t.at).toBe(Date.now() + 70)
  })

  test('reads the clock it is given', () => {
    let now = 5000
    const fired: number[] = []
    const t = new WakeTimer(() => fired.push(now), {clock: {...RealClock, now: () => now}})
    t.wakeBy(5300)
    jest.advanceTimersByTime(299)
    expect(fired).toEqual([])
    jest.advanceTimersByTime(1)
    expect(fired).toEqual([5000])
    now = 9000
    t.wakeBy(9010)
    expect(t.at).toBe(9010)
    jest.advanceTimersByTime(9)
    expect(fired).toEqual([5000])
    jest.advanceTimersByTime(1)
    expect(fired).toEqual([5000, 9000])
  })
})

describe('a serial runner: one pass at a time, requests during one coalesce into one more', () => {
  const gate = () => {
    let open!: () => void
    const p = new Promise<void>((r) => (open = r))
    return {p, open}
  }

  test('requests during a pass give exactly one more pass, and all resolve after it', async () => {
    const gates = [gate(), gate()]
    let passes = 0
    const r = new SerialRunner(async () => {
      await gates[passes++]!.p
    })
    const first = r.run()
    expect(passes).toBe(1)
    const second = r.run()
    const third = r.run()
    expect(second).toBe(first)
    expect(third).toBe(first)
    gates[0]!.open()
    await new Promise((res) => setImmediate(res))
    expect(passes).toBe(2)
    gates[1]!.open()
    await first
    expect(passes).toBe(2)
    expect(r.running).toBeUndefined()
  })

  test('a request after the run is a new run; an inactive runner runs nothing', async () => {
    let passes = 0
    let active = true
    const idle: number[] = []
    const r = new SerialRunner(
      async () => {
        passes++
      },
      {active: () => active, idle: () => idle.push(passes)},
    )
    await r.run()
    await r.run()
    expect(passes).toBe(2)
    expect(idle).toEqual([1, 2])
    active = false
    await r.run()
    expect(passes).toBe(2)
    expect(r.running).toBeUndefined()
  })

  test('stops between passes once inactive; a pass that throws ends the run with its error and the next run starts afresh', async () => {
    let passes = 0
    let active = true
    const r = new SerialRunner(
      async () => {
        passes++
        if (passes === 1) {
          void r.run()
          active = false
        }
        await Promise.resolve()
      },
      {active: () => active},
    )
    await r.run()
    expect(passes).toBe(1)
    const failing = new SerialRunner(async () => {
      throw new Error('boom')
    })
    await expect(failing.run()).rejects.toThrow('boom')
    expect(failing.running).toBeUndefined()
    await expect(failing.run()).rejects.toThrow('boom')
  })
})

describe('removeTree', () => {
  test('removes a tree with read-only directories; a missing path is fine', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vnode-remove-tree-'))
    const dir = join(root, 'a')
    await mkdir(join(dir, 'b'), {recursive: true})
    await writeFile(join(dir, 'b', 'f'), 'x')
    await chmod(join(dir, 'b'), 0o500)
    await chmod(dir, 0o500)
    await removeTree(dir)
    await expect(stat(dir)).rejects.toThrow(/ENOENT/)
    await removeTree(join(root, 'missing'))
    await removeTree(root)
    await expect(stat(root)).rejects.toThrow(/ENOENT/)
  })

  test('a link is removed, never followed; a FIFO, a directory of mode 000 (an overlay work dir) and a lone file go too', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vnode-remove-tree-'))
    const outside = join(root, 'outside')
    await mkdir(join(outside, 'kept'), {recursive: true})
    await writeFile(join(outside, 'kept', 'f'), 'x')
    const dir = join(root, 'tree')
    await mkdir(join(dir, 'work', 'work'), {recursive: true})
    await writeFile(join(dir, 'work', 'work', 'f'), 'x')
    await chmod(join(dir, 'work', 'work'), 0)
    await symlink(outside, join(dir, 'link'))
    await symlink(join(outside, 'kept', 'f'), join(dir, 'file-link'))
    expect(spawnSync('mkfifo', [join(dir, 'pipe')]).status).toBe(0)
    await removeTree(dir)
    await expect(lstat(dir)).rejects.toThrow(/ENOENT/)
    expect(await readFile(join(outside, 'kept', 'f'), 'utf8')).toBe('x')
    await removeTree(join(outside, 'kept', 'f'))
    await expect(lstat(join(outside, 'kept', 'f'))).rejects.toThrow(/ENOENT/)
    await removeTree(root)
  })
})

describe('pod helpers', () => {
  const pod: V1Pod = {
    metadata: {namespace: 'ns', name: 'p', uid: 'u1'},
    spec: {initContainers: [{name: 'i'}], containers: [{name: 'a'}, {name: 'b'}], ephemeralContainers: [{name: 'e'}]},
    status: {phase: 'Running', initContainerStatuses: [{name: 'i'} as never], containerStatuses: [{name: 'a'} as never]},
  }

  test('the container list is init containers then containers, statuses in the same order', () => {
    expect(allContainers(pod).map((c) => c.name)).toEqual(['i', 'a', 'b'])
    expect(allContainerStatuses(pod).map((c) => c.name)).toEqual(['i', 'a'])
    expect(allContainers({})).toEqual([])
    expect(allContainerStatuses(undefined)).toEqual([])
  })

  test('key, reference and terminal phase', () => {
    expect(podKey('ns', 'p')).toBe('ns/p')
    expect(podKeyOf(pod)).toBe('ns/p')
    expect(podKeyOf({})).toBe('/')
    expect(podRef(pod)).toEqual({kind: 'Pod', apiVersion: 'v1', namespace: 'ns', name: 'p', uid: 'u1'})
    expect(['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown', undefined].map(isTerminalPhase)).toEqual([false, false, true, true, false, false])
  })
})
