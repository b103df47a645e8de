import {describe, expect, test} from '@jest/globals'
import {parseEnvZero} from '../support/env-output.js'
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, writeFileSync} from 'node:fs'
import {Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {constants as fsConstants} from 'node:fs'
import {HelperRunner, type HelperMonitor} from '../../src/emulator/runtime/process/helper-runner.js'

const gone = async (pid: number) => {
  for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 20))
  return !existsSync(`/proc/${pid}`)
}

/** A monitor's exit, also when it came with its pid (a bare process is not held: it may end before its start resolves). */
function exitOf(m: HelperMonitor): Promise<[number | null, string | null]> {
  if (m.exitCode !== null || m.signalCode !== null) return Promise.resolve([m.exitCode, m.signalCode])
  return new Promise((resolve) => m.once('exit', (code, signal) => resolve([code, signal])))
}

/** A runner and an instance's pipes as plain files (read back whole), in a directory of their own, removed after. */
async function withFilePipes(prefix: string, body: (runner: HelperRunner, pipes: {stdout: string; stderr: string}, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const runner = new HelperRunner(60_000)
  try {
    const pipes = {stdout: join(dir, 'out'), stderr: join(dir, 'err')}
    writeFileSync(pipes.stdout, '')
    writeFileSync(pipes.stderr, '')
    await body(runner, pipes, dir)
  } finally {
    runner.close()
    rmSync(dir, {recursive: true, force: true})
  }
}

describe('the helper runner', () => {
  test('runs a program with exactly the environment given, its input on stdin; exit code, stdout and stderr come back byte for byte', async () => {
    const runner = new HelperRunner(60_000)
    try {
      const input = 'line one\nline two with spaces and \u00e9\n'
      const env = {ONLY: 'this one', 'a.b': 'dot=ted', PATH: '/usr/bin:/bin'}
      const shown = await runner.run('/usr/bin/env', ['-0'], {env, timeoutMs: 5_000})
      expect(shown.exitCode).toBe(0)
      expect(parseEnvZero(shown.stdout)).toEqual(env)
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

  test('a monitor started by the helper: its pid, its status fd relayed, held at its block fd until go, its output in the pipes by path, fd 5 the namespace file, its exit code or signal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'helper-spawn-'))
    const runner = new HelperRunner(60_000)
    try {
      const pipes = {stdout: join(dir, 'out'), stderr: join(dir, 'err')}
      expect(spawnSync('mkfifo', [pipes.stdout, pipes.stderr]).status).toBe(0)
      // The reader's ends, as vnode opens them (instance-io.ts's openReader).
      const read = (path: string) => {
        const stream = new Socket({fd: openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK), readable: true, writable: false})
        const got = {text: ''}
        stream.on('data', (c) => (got.text += c.toString()))
        return {got, stream}
      }
      const out = read(pipes.stdout)
      const err = read(pipes.stderr)
      const script = 'printf \'{"child-pid": %s}\' $$ >&3; read word <&4; echo "out $word $(readlink /proc/self/fd/5 | cut -c1-4) $V"; echo err >&2; exec 3>&-; exit 7'
      const m = await runner.spawn({argv: ['/bin/sh', '-c', script], env: {V: 'env-value'}, ...pipes, pidns: '/proc/self/ns/pid'})
      expect(m.pid).toBeGreaterThan(0)
      let status = ''
      m.status.on('data', (c: Buffer) => (status += c.toString()))
      const ended = new Promise<[number | null, string | null]>((resolve) => m.once('exit', (code, signal) => resolve([code, signal])))
      await new Promise((r) => setTimeout(r, 200))
      expect(status).toBe(`{"child-pid": ${m.pid}}`)
      // Held: nothing written before the word to go.
      expect(out.got.text).toBe('')
      m.go()
      expect(await ended).toEqual([7, null])
      expect(m.exitCode).toBe(7)
      await new Promise((r) => setTimeout(r, 100))
      expect(out.got.text).toBe('out go pid: env-value\n')
      expect(err.got.text).toBe('err\n')

      const sleeper = await runner.spawn({argv: ['/bin/sleep', '30'], env: {}, ...pipes})
      const killed = new Promise<[number | null, string | null]>((resolve) => sleeper.once('exit', (code, signal) => resolve([code, signal])))
      expect(sleeper.kill('SIGTERM')).toBe(true)
      expect(await killed).toEqual([null, 'SIGTERM'])
      expect(sleeper.kill('SIGTERM')).toBe(false)
      await expect(runner.spawn({argv: ['/bin/true'], env: {}, stdout: join(dir, 'missing'), stderr: pipes.stderr})).rejects.toThrow(/open/)
      out.stream.destroy()
      err.stream.destroy()
    } finally {
      runner.close()
      rmSync(dir, {recursive: true, force: true})
    }
  })
  /** Output files of their own for another spawn in dir (the helper opens them at offset 0: a second spawn would write over the first's). */
  const morePipes = (dir: string, name: string) => {
    const pipes = {stdout: join(dir, `${name}.out`), stderr: join(dir, `${name}.err`)}
    writeFileSync(pipes.stdout, '')
    writeFileSync(pipes.stderr, '')
    return pipes
  }

  test('a monitor given cgroup.procs files: once its status names PID 1 the helper writes that pid to each and lets it go, before the status reaches vnode; a refused write kills PID 1 and names the file and errno', async () => {
    await withFilePipes('helper-place-', async (runner, pipes, dir) => {
      const files = [join(dir, 'a.procs'), join(dir, 'b.procs')]
      for (const f of files) writeFileSync(f, '')
      // A monitor that names itself as PID 1 (bwrap's status), in two writes, then waits for its word on the block fd.
      const script = 'printf \'{"child-pid": \' >&3; sleep 0.1; printf \'%s, "x": 1}\' $$ >&3; read word <&4; echo "out $word"'
      const m = await runner.spawn({argv: ['/bin/sh', '-c', script], env: {}, ...pipes, cgroupProcs: files})
      // What the files held when the status that named PID 1 reached vnode.
      let status = ''
      let atStatus: string[] = []
      m.status.on('data', (c: Buffer) => {
        status += c.toString()
        if (status.includes(`"child-pid": ${m.pid}`) && atStatus.length === 0) atStatus = files.map((f) => readFileSync(f, 'utf8'))
      })
      await m.placed
      // vnode never said go: the helper did.
      expect(await exitOf(m)).toEqual([0, null])
      expect(files.map((f) => readFileSync(f, 'utf8'))).toEqual([String(m.pid), String(m.pid)])
      expect(readFileSync(pipes.stdout, 'utf8')).toBe('out go\n')
      expect(atStatus).toEqual([String(m.pid), String(m.pid)])
      expect(status).toBe(`{"child-pid": ${m.pid}, "x": 1}`)

      const refused = [files[0]!, join(dir, 'missing', 'cgroup.procs')]
      const heldPipes = morePipes(dir, 'held')
      const held = await runner.spawn({argv: ['/bin/sh', '-c', 'printf \'{"child-pid": %s}\' $$ >&3; read word <&4; echo "ran $word"'], env: {}, ...heldPipes, cgroupProcs: refused})
      await expect(held.placed).rejects.toThrow(`cannot write ${held.pid} to ${refused[1]}: ENOENT`)
      expect(await exitOf(held)).toEqual([null, 'SIGKILL'])
      expect(readFileSync(heldPipes.stdout, 'utf8')).toBe('')

      // Without files it is held until go, as before.
      const plainPipes = morePipes(dir, 'plain')
      const plain = await runner.spawn({argv: ['/bin/sh', '-c', 'printf \'{"child-pid": %s}\' $$ >&3; read word <&4; echo "plain $word"'], env: {}, ...plainPipes})
      await new Promise((r) => setTimeout(r, 200))
      expect(readFileSync(plainPipes.stdout, 'utf8')).toBe('')
      plain.go()
      expect(await exitOf(plain)).toEqual([0, null])
      expect(readFileSync(plainPipes.stdout, 'utf8')).toBe('plain go\n')
    })
  })

  const root = process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/pids/cgroup.procs')
  // As root on cgroup v1 (CI runs so: there it runs, and fails if it cannot).
  ;(root || process.env.CI === 'true' ? test : test.skip)('a PID 1 placed by the helper is in the real cgroup; one already gone (ESRCH) ends the writes, and the monitor still goes', async () => {
    const cgroup = `/sys/fs/cgroup/pids/vnode-unit-helper-${process.pid}`
    mkdirSync(cgroup)
    try {
      await withFilePipes('helper-place-cg-', async (runner, pipes, dir) => {
        const procs = join(cgroup, 'cgroup.procs')
        const m = await runner.spawn({argv: ['/bin/sh', '-c', 'printf \'{"child-pid": %s}\' $$ >&3; read word <&4; cat /proc/self/cgroup'], env: {}, ...pipes, cgroupProcs: [procs]})
        await m.placed
        expect(await exitOf(m)).toEqual([0, null])
        expect(readFileSync(pipes.stdout, 'utf8')).toMatch(new RegExp(`:pids:/vnode-unit-helper-${process.pid}\n`))

        // PID 1 gone before its placement: the kernel says ESRCH, the write after it is not made, the start goes on.
        const after = join(dir, 'after.procs')
        writeFileSync(after, '')
        const gonePipes = morePipes(dir, 'gone')
        const gone = await runner.spawn({
          argv: ['/bin/sh', '-c', 'true & wait; printf \'{"child-pid": %s}\' $! >&3; read word <&4; echo "went $word"'],
          env: {},
          ...gonePipes,
          cgroupProcs: [procs, after],
        })
        await gone.placed
        expect(await exitOf(gone)).toEqual([0, null])
        expect(readFileSync(gonePipes.stdout, 'utf8')).toBe('went go\n')
        expect(readFileSync(after, 'utf8')).toBe('')
      })
    } finally {
      rmdirSync(cgroup)
    }
  })

  test("a monitor's last status (bwrap's exit-code) always comes before its exit, also when it ends right after writing it", async () => {
    await withFilePipes('helper-last-', async (runner, _pipes, dir) => {
      // As bwrap does: names PID 1, is let go, writes its command's exit code, exits. Many at once, so that some end
      // between the helper's look at their status pipe and its reaping of them.
      const script = 'printf \'{"child-pid": %s}\' $$ >&3; read word <&4; printf \'{"exit-code": 3}\' >&3; exit 3'
      const runs = await Promise.all(
        Array.from({length: 60}, async (_, i) => {
          const own = morePipes(dir, `last-${i}`)
          const m = await runner.spawn({argv: ['/bin/sh', '-c', script], env: {}, ...own})
          let status = ''
          m.status.on('data', (c: Buffer) => (status += c.toString()))
          const ended = exitOf(m).then((exit) => ({exit, status}))
          m.go()
          return ended
        }),
      )
      for (const r of runs) expect(r).toEqual({exit: [3, null], status: expect.stringContaining('"exit-code": 3')})
    })
  })

  test("a script is run by the monitor's own process, not by a new perl: the perl variables of its environment are not read, the pid answered is the one that execs, a script that fails exits 127 with its reason", async () => {
    await withFilePipes('helper-script-', async (runner, pipes, dir) => {
      const marker = join(dir, 'pid')
      // A new perl would refuse to start: it loads PERL5OPT's module first.
      const env = {PERL5OPT: '-Mvnode_never_installed', V: 'env-value'}
      const source = 'open(my $f, ">", shift @ARGV) or die; print $f "$$ $ENV{V}"; close $f; exec { $ARGV[0] } @ARGV; die "exec: $!"'
      const m = await runner.spawn({argv: [], script: {source, args: [marker, '/bin/sh', '-c', 'echo "sh $$"; exit 3']}, env, ...pipes})
      // The script is not held at a block fd (only bwrap reads it): it may end before its start resolves.
      m.go()
      expect(await exitOf(m)).toEqual([3, null])
      expect(readFileSync(marker, 'utf8')).toBe(`${m.pid} env-value`)
      expect(readFileSync(pipes.stdout, 'utf8')).toBe(`sh ${m.pid}\n`)
      expect(readFileSync(pipes.stderr, 'utf8')).toBe('')

      const failing = await runner.spawn({argv: [], script: {source: 'die "no way\\n"', args: []}, env: {}, ...pipes})
      failing.go()
      expect(await exitOf(failing)).toEqual([127, null])
      expect(readFileSync(pipes.stderr, 'utf8')).toBe('vnode-helper: no way\n')
    })
  })

  test('a bare process started by the helper: in a session of its own, from its cwd, exactly its environment, no fd but its stdio, its output in the pipes; a failed exec or chdir is refused with its errno, and nothing of it is left', async () => {
    await withFilePipes('helper-bare-', async (runner, pipes, dir) => {
      const env = {PATH: '/usr/bin:/bin', 'a.b': 'dot=ted', PERL5OPT: '-Mvnode_never_installed'}
      // Found on the environment's PATH, as execvp finds it; looked at from outside while it runs.
      const sleeper = await runner.spawnBare({argv: ['sleep', '30'], env, ...pipes, cwd: dir})
      const pid = sleeper.pid!
      expect(readdirSync(`/proc/${pid}/fd`).sort()).toEqual(['0', '1', '2'])
      expect(readlinkSync(`/proc/${pid}/fd/0`)).toBe('/dev/null')
      expect(readlinkSync(`/proc/${pid}/fd/1`)).toBe(pipes.stdout)
      expect(readlinkSync(`/proc/${pid}/fd/2`)).toBe(pipes.stderr)
      expect(readlinkSync(`/proc/${pid}/cwd`)).toBe(dir)
      expect(parseEnvZero(readFileSync(`/proc/${pid}/environ`, 'utf8'))).toEqual(env)
      // Its session's id is its pid (setsid: its group is its own to signal).
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      expect(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]).toBe(String(pid))
      process.kill(-pid, 'SIGTERM')
      expect(await exitOf(sleeper)).toEqual([null, 'SIGTERM'])

      const m = await runner.spawnBare({argv: ['/bin/sh', '-c', 'echo out; echo err >&2; exit 5'], env: {}, ...pipes, cwd: '/'})
      expect(await exitOf(m)).toEqual([5, null])
      expect(readFileSync(pipes.stdout, 'utf8')).toBe('out\n')
      expect(readFileSync(pipes.stderr, 'utf8')).toBe('err\n')

      // An environment too large for the kernel fails the exec, not the helper.
      await expect(runner.spawnBare({argv: ['/bin/true'], env: {BIG: 'b'.repeat(200_000)}, ...pipes, cwd: '/'})).rejects.toMatchObject({code: 'E2BIG'})
      await expect(runner.spawnBare({argv: ['no-such-program-here'], env: {PATH: '/usr/bin:/bin'}, ...pipes, cwd: '/'})).rejects.toMatchObject({code: 'ENOENT'})
      writeFileSync(join(dir, 'not-executable'), 'echo no\n')
      await expect(runner.spawnBare({argv: [join(dir, 'not-executable')], env: {}, ...pipes, cwd: '/'})).rejects.toMatchObject({code: 'EACCES'})
      await expect(runner.spawnBare({argv: ['/bin/true'], env: {}, ...pipes, cwd: join(dir, 'missing')})).rejects.toMatchObject({
        code: 'ENOENT',
        message: expect.stringMatching(/^chdir .*missing: No such file/),
      })
      // The refused ones were reaped: the helper has no child left.
      const children = readFileSync(`/proc/${runner.pid}/task/${runner.pid}/children`, 'utf8').trim()
      expect(children).toBe('')
    })
  })
})
