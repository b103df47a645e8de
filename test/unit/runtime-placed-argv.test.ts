import {describe, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {placedArgv} from '../../src/emulator/runtime/process/placed-argv.js'
import type {SpawnSpec} from '../../src/emulator/runtime/process/process-spec.js'
import {tempDir} from './temp-dirs.js'

function spec(extra: Partial<SpawnSpec>): SpawnSpec {
  return {argv: [], env: {PATH: process.env.PATH ?? '/usr/bin:/bin'}, cwd: '/', logPath: '/dev/null', pipes: '/dev/null', ...extra}
}

describe('a bare process placed in its cgroups before its program runs', () => {
  test('without cgroup files the program is spawned as given', () => {
    expect(placedArgv(spec({}), 'sleep', ['1'])).toEqual(['sleep', '1'])
  })

  test('a program that does not resolve is spawned as given, so the spawn reports its own error', () => {
    expect(placedArgv(spec({cgroupProcs: ['/x/cgroup.procs']}), 'no-such-program-here', ['a'])).toEqual(['no-such-program-here', 'a'])
  })

  test('the placing shell writes the pid the program then runs as to every file, and the arguments reach it untouched', async () => {
    const dir = tempDir('vnode-placed-')
    const files = [join(dir, 'cpu.procs'), join(dir, 'memory.procs')]
    for (const f of files) writeFileSync(f, '')
    const odd = 'a b; $(echo no) "q" \\ *'
    const [file, ...args] = placedArgv(spec({cgroupProcs: files}), 'sh', ['-c', 'echo $$; printf "%s\\n" "$1"', 'sh', odd])
    const r = await execa(file!, args, {env: {PATH: process.env.PATH ?? '/usr/bin:/bin'}, extendEnv: false})
    const [pid, arg] = r.stdout.split('\n')
    expect(arg).toBe(odd)
    for (const f of files) expect(readFileSync(f, 'utf8').trim()).toBe(pid)
  })

  test('a file it cannot write stops the start before the program runs (exit 126)', async () => {
    const dir = tempDir('vnode-placed-')
    const marker = join(dir, 'ran')
    const [file, ...args] = placedArgv(spec({cgroupProcs: [join(dir, 'missing', 'cgroup.procs')]}), 'sh', ['-c', `: > ${marker}`])
    const r = await execa(file!, args, {reject: false})
    expect(r.exitCode).toBe(126)
    expect(() => readFileSync(marker)).toThrow()
  })
})
