import {afterEach, describe, expect, test} from '@jest/globals'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {E2eEnv, MachineFirstEnv} from '../e2e/env.mjs'
import {machineFilesToCome, releaseMachine} from '../e2e/host-lock.js'
import {fileGroup, groupOrder, lockGroup} from '../e2e/sequencer.mjs'

const Here = dirname(new URL(import.meta.url).pathname)
const e2e = (name: string) => join(Here, '..', 'e2e', name)

describe('the order e2e files start in', () => {
  test('each file is grouped by the locks its top-level describe takes', () => {
    expect(fileGroup(e2e('sandbox-pool-churn.test.ts'))).toBe(0)
    expect(fileGroup(e2e('network-lock.test.ts'))).toBe(1)
    expect(fileGroup(e2e('cgroups.test.ts'))).toBe(2)
    expect(fileGroup(e2e('badinput-cli.test.ts'))).toBe(2)
    expect(fileGroup(e2e('node.test.ts'))).toBe(2)
    expect(fileGroup(join(Here, 'watch-loop.test.ts'))).toBe(3)
    expect(lockGroup("describeHolding(['cgroups', 'network'])('x', () => {})")).toBe(1)
    expect(lockGroup("describeHolding(['kubelet-port'])('x', () => {})")).toBe(2)
  })

  test('machine files first, then the network chain, then the rest, each group in the order given', () => {
    const groups: Record<string, number> = {'/a/u1': 3, '/a/e1': 2, '/a/n1': 1, '/a/m1': 0, '/a/e2': 2, '/a/n2': 1, '/a/u2': 3}
    const tests = Object.keys(groups).map((path) => ({path}))
    const {sorted, machineFirst} = groupOrder(tests, (p: string) => groups[p])
    expect(sorted.map((t) => t.path)).toEqual(['/a/m1', '/a/n1', '/a/n2', '/a/e1', '/a/e2', '/a/u1', '/a/u2'])
    expect(machineFirst).toEqual(['m1'])
  })
})

describe('shared holders wait for the machine files', () => {
  const dirs: string[] = []
  afterEach(() => {
    delete process.env[E2eEnv.dir]
    for (const d of dirs.splice(0)) rmSync(d, {recursive: true, force: true})
  })

  test('a machine file is to come until it has released the machine', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-order-'))
    dirs.push(dir)
    process.env[E2eEnv.dir] = dir
    const env = {[MachineFirstEnv]: 'churn.test.ts,other.test.ts'}
    expect(machineFilesToCome(env)).toEqual(['churn.test.ts', 'other.test.ts'])
    releaseMachine('/repo/test/e2e/churn.test.ts')
    expect(machineFilesToCome(env)).toEqual(['other.test.ts'])
    releaseMachine('/repo/test/e2e/other.test.ts')
    expect(machineFilesToCome(env)).toEqual([])
    expect(readFileSync(join(dir, 'machine.done', 'churn.test.ts'), 'utf8')).toBe('')
    // A run with no machine file (one file run alone) waits for nothing.
    expect(machineFilesToCome({})).toEqual([])
  })
})
