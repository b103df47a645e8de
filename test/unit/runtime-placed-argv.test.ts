import {describe, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {placedArgv} from '../../src/emulator/runtime/process/placed-argv.js'
import type {SpawnSpec} from '../../src/emulator/runtime/process/process-spec.js'
import {tempDir} from './temp-dirs.js'

const Path = process.env.PATH ?? '/usr/bin:/bin'

function spec(extra: Partial<SpawnSpec>): SpawnSpec {
  return {argv: [], env: {PATH: Path}, cwd: '/', logPath: '/dev/null', pipes: '/dev/null', ...extra}
}

function procsFiles(n: number): string[] {
  const dir = tempDir('vnode-placed-')
  const files = Array.from({length: n}, (_, i) => join(dir, `${i}.procs`))
  for (const f of files) writeFileSync(f, '')
  return files
}

describe('a bare process placed in its cgroups before its program runs', () => {
  test('without cgroup files the program is spawned as given', () => {
    expect(placedArgv(spec({}), 'sleep', ['1'])).toEqual({argv: ['sleep', '1'], placed: false})
  })

  test('a program that does not resolve, or an environment perl itself reads, is spawned as given (placed after its spawn)', () => {
    expect(placedArgv(spec({cgroupProcs: ['/x/cgroup.procs']}), 'no-such-program-here', ['a'])).toEqual({argv: ['no-such-program-here', 'a'], placed: false})
    expect(placedArgv(spec({cgroupProcs: ['/x/cgroup.procs'], env: {PATH: Path, PERL5OPT: '-w'}}), 'sh', ['-c', 'true'])).toEqual({argv: ['sh', '-c', 'true'], placed: false})
  })

  test('the pid the program runs as is written to every file; its arguments, argv[0] and environment reach it untouched', async () => {
    const files = procsFiles(2)
    const odd = 'a b; $(echo no) "q" \\ *'
    // Names a shell would drop or rewrite (PWD, IFS, a.b): the kubelet passes every one as the spec has it.
    const env = {PATH: Path, 'a.b': '1', 'x-y': '2', IFS: 'x', PWD: '/elsewhere'}
    const program = 'open(my $c, "<", "/proc/self/cmdline"); my @argv = split /\\0/, <$c>; print join("\\n", $$, $argv[0], $ARGV[0], map { "$_=$ENV{$_}" } sort keys %ENV)'
    const {
      argv: [file, ...args],
      placed,
    } = placedArgv(spec({cgroupProcs: files, env}), 'perl', ['-e', program, odd])
    expect(placed).toBe(true)
    const r = await execa(file!, args, {env, extendEnv: false, cwd: '/'})
    const [pid, argv0, arg, ...envLines] = r.stdout.split('\n')
    expect([argv0, arg]).toEqual(['perl', odd])
    for (const f of files) expect(readFileSync(f, 'utf8').trim()).toBe(pid)
    expect(envLines).toEqual(['IFS=x', 'PATH=' + Path, 'PWD=/elsewhere', 'a.b=1', 'x-y=2'])
  })

  test('a file it cannot write stops the start before the program runs (exit 126)', async () => {
    const dir = tempDir('vnode-placed-')
    const marker = join(dir, 'ran')
    const {
      argv: [file, ...args],
    } = placedArgv(spec({cgroupProcs: [join(dir, 'missing', 'cgroup.procs')]}), 'sh', ['-c', `: > ${marker}`])
    const r = await execa(file!, args, {reject: false})
    expect(r.exitCode).toBe(126)
    expect(() => readFileSync(marker)).toThrow()
  })
})
