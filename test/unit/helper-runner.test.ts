import {describe, expect, test} from '@jest/globals'
import {spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {HelperRunner} from '../../src/emulator/runtime/process/helper-runner.js'

const gone = async (pid: number) => {
  for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 20))
  return !existsSync(`/proc/${pid}`)
}

describe('the helper runner', () => {
  test('runs a program with exactly the environment given, its input on stdin; exit code, stdout and stderr come back byte for byte', async () => {
    const runner = new HelperRunner(60_000)
    try {
      const input = 'line one\nline two with spaces and \u00e9\n'
      const env = {ONLY: 'this one', 'a.b': 'dot=ted', PATH: '/usr/bin:/bin'}
      const shown = await runner.run('/usr/bin/env', ['-0'], {env, timeoutMs: 5_000})
      expect(shown.exitCode).toBe(0)
      expect(
        Object.fromEntries(
          shown.stdout
            .split('\0')
            .filter(Boolean)
            .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
        ),
      ).toEqual(env)
      const echoed = await runner.run('/bin/sh', ['-c', 'cat; echo "to err $1" >&2; exit 3', 'sh', 'an arg'], {env: {}, input, timeoutMs: 5_000})
      expect(echoed).toEqual({exitCode: 3, stdout: input, stderr: 'to err an arg\n', timedOut: false})
      expect(runner.pid).toBeDefined()
      expect(runner.helperRuns).toBe(2)
    } finally {
      runner.close()
    }
  })

  test('many at once, each answered with its own output; a program that is not there answers 127 with the reason; a slow one is killed at its timeout', async () => {
    const runner = new HelperRunner(60_000)
    try {
      const runs = await Promise.all(Array.from({length: 40}, (_, i) => runner.run('/bin/sh', ['-c', 'sleep 0.0$1; echo $1', 'sh', String(i % 10)], {env: {}, timeoutMs: 5_000})))
      expect(runs.map((r) => r.stdout)).toEqual(Array.from({length: 40}, (_, i) => `${i % 10}\n`))
      const missing = await runner.run('/no/such/program', [], {env: {}, timeoutMs: 5_000})
      expect(missing.exitCode).toBe(127)
      expect(missing.stderr).toMatch(/\/no\/such\/program: No such file/)
      const slow = await runner.run('/bin/sleep', ['30'], {env: {}, timeoutMs: 500})
      expect(slow).toMatchObject({exitCode: undefined, timedOut: true, stderr: 'killed by SIGKILL'})
    } finally {
      runner.close()
    }
  })

  test('the helper goes once idle (after the runs under way), and the next run starts another; a large input goes around it', async () => {
    const runner = new HelperRunner(300)
    try {
      const first = runner.run('/bin/sh', ['-c', 'sleep 0.5; echo done'], {env: {}, timeoutMs: 5_000})
      const pid = runner.pid!
      expect(pid).toBeGreaterThan(0)
      expect((await first).stdout).toBe('done\n')
      expect(await gone(pid)).toBe(true)
      expect(runner.pid).toBeUndefined()
      expect((await runner.run('/bin/echo', ['again'], {env: {}, timeoutMs: 5_000})).stdout).toBe('again\n')
      const second = runner.pid!
      expect(second).not.toBe(pid)
      const before = runner.helperRuns
      const big = 'x'.repeat(100_000)
      expect((await runner.run('/usr/bin/wc', ['-c'], {env: {}, input: big, timeoutMs: 5_000})).stdout.trim()).toBe('100000')
      expect(runner.helperRuns).toBe(before)
      runner.close()
      expect(await gone(second)).toBe(true)
    } finally {
      runner.close()
    }
  })

  test('a helper told to go while a run is under way still answers it, beside the next helper answering the next run', async () => {
    const runner = new HelperRunner(60_000)
    try {
      const slow = runner.run('/bin/sh', ['-c', 'sleep 0.4; echo first'], {env: {}, timeoutMs: 5_000})
      const old = runner.pid!
      runner.close()
      const next = await runner.run('/bin/sh', ['-c', 'echo second'], {env: {}, timeoutMs: 5_000})
      expect(runner.pid).not.toBe(old)
      expect(next.stdout).toBe('second\n')
      expect((await slow).stdout).toBe('first\n')
      expect(await gone(old)).toBe(true)
    } finally {
      runner.close()
    }
  })

  test('a run under way keeps a process that has nothing else to do alive until its answer; an idle helper does not', () => {
    // The built runner (npm test builds first), in a process of its own whose only work is the run.
    const built = join(dirname(new URL(import.meta.url).pathname), '..', '..', 'dist', 'emulator', 'runtime', 'process', 'helper-runner.js')
    const script = `import {HelperRunner} from ${JSON.stringify(built)}; const r = new HelperRunner(60000); const a = await r.run('/bin/echo', ['answered'], {env: {}, timeoutMs: 5000}); process.stdout.write(a.stdout)`
    const started = Date.now()
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {encoding: 'utf8', timeout: 20_000})
    expect(child.stderr).toBe('')
    expect(child.stdout).toBe('answered\n')
    // The helper (idle for a minute) did not hold the process once the answer came.
    expect(Date.now() - started).toBeLessThan(15_000)
  })
})
