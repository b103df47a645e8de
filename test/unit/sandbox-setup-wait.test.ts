import {afterEach, describe, expect, test} from '@jest/globals'
import {spawn, type ChildProcess} from 'node:child_process'
import {copyFileSync} from 'node:fs'
import {join} from 'node:path'
import {DefaultLookBeforeBoundaryMs, nextLookDelay, waitForProgram} from '../../src/emulator/runtime/process/sandboxed-start.js'
import {tempDir} from './temp-dirs.js'

/**
 * What an exec into a sandbox waits for: its PID 1 no longer running bwrap
 * (the root is built, the container's program exec'd). A shell copied under
 * bwrap's name stands in for a setup of a chosen length.
 */
describe('waitForProgram: an exec enters a sandbox only once it is set up', () => {
  const children: ChildProcess[] = []
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL')
  })

  /** A process whose exe is named bwrap for setupSeconds, then the program sleep. */
  function fakeSetup(setupSeconds: number): number {
    const bwrap = join(tempDir('vnode-setup-wait-'), 'bwrap')
    copyFileSync('/usr/bin/dash', bwrap)
    const child = spawn(bwrap, ['-c', `sleep ${setupSeconds}; exec /usr/bin/sleep 30`], {stdio: 'ignore'})
    children.push(child)
    return child.pid!
  }

  test('resolves once the program has replaced bwrap', async () => {
    const pid = fakeSetup(0.3)
    const started = Date.now()
    await waitForProgram(pid)
    expect(Date.now() - started).toBeGreaterThanOrEqual(250)
    expect(Date.now() - started).toBeLessThan(3_000)
  })

  test('a setup slower than a few seconds (a burst of starts on a loaded host) is waited for, not entered early', async () => {
    const pid = fakeSetup(6)
    const started = Date.now()
    await waitForProgram(pid)
    expect(Date.now() - started).toBeGreaterThanOrEqual(5_900)
  }, 15_000)

  test("one look is taken just before each boundary of the look period (the relist's), where the back-off's would come after it", () => {
    const before = DefaultLookBeforeBoundaryMs
    // 200 ms before a boundary the back-off's 100 ms stands; 120 ms before, the look comes `before` ms ahead of it.
    expect(nextLookDelay(10_800, 100, 1000)).toBe(100)
    expect(nextLookDelay(10_880, 100, 1000)).toBe(120 - before)
    expect(nextLookDelay(10_880, 5, 1000)).toBe(5)
    // In the last stretch (the look is done), and without a period, the back-off's.
    expect(nextLookDelay(11_000 - before + 5, 100, 1000)).toBe(100)
    expect(nextLookDelay(10_880, 100)).toBe(100)
  })

  test('a process that is gone needs no wait', async () => {
    const child = spawn('/usr/bin/true', [], {stdio: 'ignore'})
    await new Promise((r) => child.once('exit', r))
    const started = Date.now()
    await waitForProgram(child.pid!)
    expect(Date.now() - started).toBeLessThan(500)
  })
})
