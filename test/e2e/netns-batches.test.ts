import {afterAll, expect} from '@jest/globals'
import {execFileSync} from 'node:child_process'
import {addNetns, deleteNetns, netnsExists, netnsProgramRuns} from '../../src/emulator/runtime/network/netns.js'
import {helpers} from '../../src/emulator/runtime/process/helper-runner.js'
import {describeE2e, testWhen} from './helpers.js'

const hasIp = (() => {
  try {
    execFileSync('ip', ['-V'], {stdio: 'ignore'})
    return true
  } catch {
    return false
  }
})()
const canRun = process.getuid?.() === 0 && hasIp

/** Named network namespaces of a burst of pods share their `ip` programs; each caller still gets its own outcome. */
describeE2e('network namespaces in batches', () => {
  const prefix = `nsbatch-${process.pid}-`
  const names = Array.from({length: 20}, (_, i) => `${prefix}${i}`)

  afterAll(() => {
    // Whatever a failed assertion left: removed one by one, by name.
    for (const n of names) if (netnsExists(n)) execFileSync('ip', ['netns', 'del', n])
  })

  testWhen(canRun, 'it needs root and iproute2')('20 namespaces added and deleted at once take a few `ip` runs, not 20 each; a failed line fails its caller only', async () => {
    const before = netnsProgramRuns()
    const helperBefore = helpers.helperRuns
    const bad = `${prefix}bad/name`
    const added = await Promise.allSettled([...names.map((n) => addNetns(n)), addNetns(bad)])
    expect(added.slice(0, 20).every((r) => r.status === 'fulfilled')).toBe(true)
    expect(added[20]).toMatchObject({status: 'rejected', reason: expect.objectContaining({message: expect.stringContaining(`ip netns add ${bad}`)})})
    expect(names.every(netnsExists)).toBe(true)
    const addRuns = netnsProgramRuns() - before
    expect(addRuns).toBeGreaterThanOrEqual(1)
    expect(addRuns).toBeLessThanOrEqual(3)
    await Promise.all(names.map((n) => deleteNetns(n)))
    expect(names.some(netnsExists)).toBe(false)
    expect(netnsProgramRuns() - before - addRuns).toBeLessThanOrEqual(3)
    // Each `ip` ran from the node's helper: vnode forked itself for none.
    expect(helpers.helperRuns - helperBefore).toBe(netnsProgramRuns() - before)
  })
})
