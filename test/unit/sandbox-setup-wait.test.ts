import {afterEach, describe, expect, test} from '@jest/globals'
import {spawn, type ChildProcess} from 'node:child_process'
import {copyFileSync} from 'node:fs'
import {join} from 'node:path'
import {setupLostHostMount, waitForProgram} from '../../src/emulator/runtime/process/sandboxed-start.js'
import {boundMountsGone, withMountsOfNow} from '../../src/emulator/runtime/sandbox/spawn.js'
import type {ContainerSandboxSpec} from '../../src/emulator/runtime/sandbox/spec.js'
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

  test('a process that is gone needs no wait', async () => {
    const child = spawn('/usr/bin/true', [], {stdio: 'ignore'})
    await new Promise((r) => child.once('exit', r))
    const started = Date.now()
    await waitForProgram(child.pid!)
    expect(Date.now() - started).toBeLessThan(500)
  })
})

/**
 * A host mount the sandbox binds back over its writable layer can go away
 * between the start's read of the mount table and bwrap's mount of it
 * (another runtime's container ending): bwrap's setup fails, and the start is
 * made again with the mounts of now, rather than failing the container.
 */
describe('a sandbox setup that lost a host mount is made again', () => {
  const layer = (subMounts: string[]): ContainerSandboxSpec =>
    ({
      rootLayer: {
        dir: '/l',
        overlays: [
          {path: '/tmp', merged: '/l/merged/tmp'},
          {path: '/var', merged: '/l/merged/var'},
        ],
        subMounts,
        mounts: [],
        mode: 'root',
      },
    }) as unknown as ContainerSandboxSpec
  const ended = async () => {
    const child = spawn('/usr/bin/true', [], {stdio: 'ignore'})
    await new Promise((r) => child.once('exit', r))
    return child.pid!
  }

  test('the mounts bound that are mounted no more; the sandbox again with the topmost mounts of now', () => {
    const sandbox = layer(['/tmp/a/rootfs', '/tmp/b/rootfs', '/var/lib/x'])
    expect(boundMountsGone(sandbox, ['/', '/tmp/b/rootfs', '/var/lib/x'])).toEqual(['/tmp/a/rootfs'])
    expect(boundMountsGone(layer([]), ['/'])).toEqual([])
    const again = withMountsOfNow(sandbox, ['/', '/tmp/b/rootfs', '/tmp/b/rootfs/dev', '/var/lib/x', '/usr/y', '/proc'])
    expect(again.rootLayer!.subMounts).toEqual(['/tmp/b/rootfs', '/var/lib/x'])
    expect(again.rootLayer!.overlays).toBe(sandbox.rootLayer!.overlays)
    expect(sandbox.rootLayer!.subMounts).toEqual(['/tmp/a/rootfs', '/tmp/b/rootfs', '/var/lib/x'])
  })

  test('only a failed setup with a bound mount gone is made again: not a program that ran, not one that lives, not another failure', async () => {
    const sandbox = layer(['/tmp/a/rootfs'])
    const gone = () => ['/tmp/a/rootfs']
    const none = () => []
    const pid = await ended()
    expect(await setupLostHostMount(pid, Promise.resolve({code: 1, signal: null, setupFailed: true}), sandbox, gone)).toBe(true)
    // bwrap's own failure with every bound mount still there: the container's StartError, as before.
    expect(await setupLostHostMount(pid, Promise.resolve({code: 1, signal: null, setupFailed: true}), sandbox, none)).toBe(false)
    // The program ran and exited 1.
    expect(await setupLostHostMount(pid, Promise.resolve({code: 1, signal: null}), sandbox, gone)).toBe(false)
    // No host mount bound: nothing to lose.
    expect(await setupLostHostMount(pid, Promise.resolve({code: 1, signal: null, setupFailed: true}), layer([]), gone)).toBe(false)
    // PID 1 lives (its program runs): answered at once, without waiting for an exit that may never come.
    const never = new Promise<never>(() => undefined)
    expect(await setupLostHostMount(process.pid, never, sandbox, gone)).toBe(false)
  })
})
