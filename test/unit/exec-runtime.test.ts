import {describe, expect, test} from '@jest/globals'
import {tempDir} from './temp-dirs.js'
import {chmodSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {PassThrough} from 'node:stream'
import {TerminalSizes} from '../../src/emulator/provider/streaming.js'
import {exitCodeOf, startExec} from '../../src/emulator/runtime/container/exec.js'
import {ExecStartError, resolveExecutable} from '../../src/emulator/runtime/process/executable.js'
import {portForwardStreamProblem} from '../../src/emulator/server/routes/port-forward.js'
import {exitCodeStatus, internalErrorStatus, parseRemoteCommandOptions} from '../../src/emulator/server/streaming/remotecommand.js'

const PATH = '/usr/local/bin:/usr/bin:/bin'

function collect(s: PassThrough): () => string {
  let text = ''
  s.on('data', (d: Buffer) => (text += d.toString()))
  return () => text
}

describe('exec request options and results', () => {
  test('query flags as the kubelet reads them; a terminal drops stderr; nothing asked for is an error', () => {
    expect(parseRemoteCommandOptions(new URLSearchParams('output=1&error=1'))).toEqual({stdin: false, stdout: true, stderr: true, tty: false})
    expect(parseRemoteCommandOptions(new URLSearchParams('input=1&output=1&error=1&tty=1'))).toEqual({stdin: true, stdout: true, stderr: false, tty: true})
    expect(parseRemoteCommandOptions(new URLSearchParams('tty=1'))).toBe('you must specify at least 1 of stdin, stdout, stderr')
  })

  test('a non-zero exit is the Status kubectl turns into "command terminated with exit code N"', () => {
    expect(exitCodeStatus(3, 'x')).toEqual({
      metadata: {},
      status: 'Failure',
      message: 'command terminated with non-zero exit code: x',
      reason: 'NonZeroExitCode',
      details: {causes: [{reason: 'ExitCode', message: '3'}]},
    })
    expect(internalErrorStatus('boom')).toMatchObject({status: 'Failure', reason: 'InternalError', code: 500, message: 'Internal error occurred: boom'})
  })

  test('port-forward stream headers are checked as the kubelet does', () => {
    expect(portForwardStreamProblem('8080', 'data')).toBeUndefined()
    expect(portForwardStreamProblem(undefined, 'data')).toBe('"port" header is required')
    expect(portForwardStreamProblem('0', 'data')).toBe('port "0" must be > 0')
    expect(portForwardStreamProblem('70000', 'data')).toBe('unable to parse "70000" as a port')
    expect(portForwardStreamProblem('80', 'resize')).toBe('invalid stream type "resize"')
  })
})

describe('exec processes', () => {
  test('executables are found through the container PATH; missing and non-executable files are start errors', () => {
    const dir = tempDir('exec-unit-')
    writeFileSync(join(dir, 'tool'), '#!/bin/sh\n', {mode: 0o755})
    writeFileSync(join(dir, 'data'), 'x')
    chmodSync(join(dir, 'data'), 0o644)
    expect(resolveExecutable('tool', {PATH: `/nonexistent:${dir}`}, '/')).toBe(join(dir, 'tool'))
    expect(resolveExecutable('./tool', {}, dir)).toBe(join(dir, 'tool'))
    expect(() => resolveExecutable('nosuch', {PATH: dir}, '/')).toThrow('exec: "nosuch": executable file not found in $PATH')
    // Root may execute anything with an x bit; a file without one is refused for everyone.
    expect(() => resolveExecutable(join(dir, 'data'), {}, '/')).toThrow(ExecStartError)
  })

  test('exit statuses: the code, or 128 + the signal', () => {
    expect(exitCodeOf(3, null)).toBe(3)
    expect(exitCodeOf(null, 'SIGKILL')).toBe(137)
    expect(exitCodeOf(0, 15)).toBe(143)
    expect(exitCodeOf(0, 0)).toBe(0)
  })

  test('runs argv with the given env and cwd, stdin piped in, stdout and stderr apart, and the exit code', async () => {
    const dir = tempDir('exec-unit-')
    const [stdin, stdout, stderr] = [new PassThrough(), new PassThrough(), new PassThrough()]
    const out = collect(stdout)
    const err = collect(stderr)
    const abort = new AbortController()
    const h = await startExec(
      ['sh', '-c', 'echo "$GREETING from $(pwd)"; tr a-z A-Z; echo oops >&2; exit 3'],
      {env: {PATH, GREETING: 'hello'}, cwd: dir},
      {stdin, stdout, stderr, tty: false, signal: abort.signal},
    )
    stdin.end('piped\n')
    expect(await h.done).toBe(3)
    expect(out()).toBe(`hello from ${dir}\nPIPED\n`)
    expect(err()).toBe('oops\n')
  })

  test('a client that goes away kills the command', async () => {
    const abort = new AbortController()
    const h = await startExec(['sleep', '30'], {env: {PATH}, cwd: '/'}, {stdout: new PassThrough(), tty: false, signal: abort.signal})
    abort.abort()
    expect(await h.done).toBe(137)
  })

  test('-t: a pseudo-terminal of the client size, resized on request, TERM set', async () => {
    const [stdin, stdout] = [new PassThrough(), new PassThrough()]
    const out = collect(stdout)
    const resize = new TerminalSizes()
    resize.push({width: 123, height: 45})
    const abort = new AbortController()
    const h = await startExec(['sh', '-c', 'tty; stty size; echo $TERM; read x; stty size; exit 4'], {env: {PATH}, cwd: '/'}, {stdin, stdout, tty: true, resize, signal: abort.signal})
    for (let i = 0; i < 200 && !out().includes('xterm'); i++) await new Promise((r) => setTimeout(r, 10))
    resize.push({width: 100, height: 30})
    await new Promise((r) => setTimeout(r, 50))
    stdin.write('\r')
    expect(await h.done).toBe(4)
    expect(out()).toMatch(/^\/dev\/pts\/\d+\r\n45 123\r\nxterm\r\n/)
    expect(out()).toContain('30 100\r\n')
  })
})
