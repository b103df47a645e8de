import {describe, expect, test} from '@jest/globals'
import type {V1Pod} from '@kubernetes/client-node'
import {appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {open} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {containerLogFile, formatCriLine} from '../../src/emulator/runtime/logs/layout.js'
import {planContainerLogs} from '../../src/emulator/runtime/logs/plan.js'
import {type LogOptions, parseLogOptions} from '../../src/emulator/server/log-options.js'
import {readCriRecords, tailStart, type FollowControl} from '../../src/emulator/runtime/logs/reader.js'
import {LogFormatter, rfc3339Nano, type LogWrite} from '../../src/emulator/server/log-format.js'
import {nameProblem} from '../../src/emulator/server/validate.js'

const base: LogOptions = {follow: false, previous: false, timestamps: false, stream: 'All'}

/** The /containerLogs route's composition: the runtime's one reader, rendered by the server's formatter. */
async function readLogFile(file: string, opts: LogOptions, write: LogWrite, follow?: FollowControl): Promise<void> {
  const fmt = new LogFormatter(opts, write)
  await readCriRecords(
    file,
    opts.tailLines,
    async (line) => {
      await fmt.record(line)
      return fmt.done
    },
    follow,
  )
}

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'vnode-logs-'))
}

async function collect(file: string, opts: Partial<LogOptions>): Promise<string> {
  let out = ''
  await readLogFile(file, {...base, ...opts}, async (c) => void (out += c))
  return out
}

test('a read without follow is of the file as it was at its start: --tail 2 gives 2 records even as more are written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vnode-tail-'))
  try {
    const file = join(dir, '0.log')
    writeFileSync(file, ['one', 'two', 'three'].map((c) => formatCriLine('stdout', c)).join(''))
    const got: string[] = []
    await readCriRecords(file, 2, async (line) => {
      got.push(line.content.toString())
      // The container writes on while the read is under way.
      appendFileSync(file, formatCriLine('stdout', `more ${got.length}`))
      return false
    })
    expect(got).toEqual(['two', 'three'])
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

describe('log query options', () => {
  test('decodes the kubelet query, with tail=all and lenient booleans', () => {
    const o = parseLogOptions(new URLSearchParams('follow=true&previous=1&timestamps=True&tailLines=5&limitBytes=10'), 1_000_000)
    expect(o).toEqual({follow: true, previous: true, timestamps: true, tailLines: 5, limitBytes: 10, sinceMs: undefined, stream: 'All'})
    expect(parseLogOptions(new URLSearchParams('tail=3')).tailLines).toBe(3)
    expect(parseLogOptions(new URLSearchParams('tail=all&tailLines=3')).tailLines).toBeUndefined()
    expect(parseLogOptions(new URLSearchParams('follow=false&previous=0')).follow).toBe(false)
    expect(parseLogOptions(new URLSearchParams('sinceSeconds=10'), 1_000_000).sinceMs).toBe(990_000)
    expect(parseLogOptions(new URLSearchParams('sinceTime=2026-01-02T03:04:05Z')).sinceMs).toBe(Date.parse('2026-01-02T03:04:05Z'))
  })

  test('bad values are refused with specific messages', () => {
    const bad = (q: string) => () => parseLogOptions(new URLSearchParams(q))
    expect(bad('tailLines=abc')).toThrow('"tailLines" must be an integer, got "abc"')
    expect(bad('tailLines=-1')).toThrow('"tailLines" must be greater than or equal to 0')
    expect(bad('limitBytes=0')).toThrow('"limitBytes" must be greater than 0')
    expect(bad('sinceSeconds=0')).toThrow('"sinceSeconds" must be greater than 0')
    expect(bad('sinceSeconds=5&sinceTime=2026-01-02T03:04:05Z')).toThrow('at most one of "sinceTime" or "sinceSeconds"')
    expect(bad('sinceTime=yesterday')).toThrow('"sinceTime" must be an RFC 3339 time')
    expect(bad('stream=Both')).toThrow('"stream" must be All, Stdout or Stderr')
  })

  test('names that could walk the file system are refused', () => {
    expect(nameProblem('namespace', '..')).toContain('invalid namespace name ".."')
    expect(nameProblem('pod', '../etc')).toContain('invalid pod name')
    expect(nameProblem('container', 'a/b')).toContain('invalid container name')
    expect(nameProblem('pod', 'web-1.x')).toBeUndefined()
    expect(nameProblem('container', 'web.x')).toContain('invalid container name')
  })
})

describe('reading CRI log files', () => {
  const t0 = new Date('2026-01-02T03:04:05.000Z')
  const at = (s: number) => new Date(t0.getTime() + s * 1000)
  function sample(dir: string): string {
    const file = join(dir, '0.log')
    writeFileSync(
      file,
      formatCriLine('stdout', 'one', 'F', at(0)) +
        formatCriLine('stderr', 'two', 'F', at(1)) +
        'not a cri line\n' +
        formatCriLine('stdout', 'thr', 'P', at(2)) +
        formatCriLine('stdout', 'ee', 'F', at(2)) +
        formatCriLine('stdout', 'four', 'F', at(3)),
    )
    return file
  }

  test('plain, stream selection, since, timestamps and limitBytes', async () => {
    const dir = tmp()
    try {
      const file = sample(dir)
      expect(await collect(file, {})).toBe('one\ntwo\nthree\nfour\n')
      expect(await collect(file, {stream: 'Stderr'})).toBe('two\n')
      expect(await collect(file, {sinceMs: at(2).getTime()})).toBe('three\nfour\n')
      expect(await collect(file, {timestamps: true, sinceMs: at(3).getTime()})).toBe('2026-01-02T03:04:08Z four\n')
      expect(await collect(file, {limitBytes: 6})).toBe('one\ntw')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('tail counts file records from the end, across read chunks', async () => {
    const dir = tmp()
    try {
      const file = sample(dir)
      expect(await collect(file, {tailLines: 2})).toBe('ee\nfour\n')
      expect(await collect(file, {tailLines: 0})).toBe('')
      expect(await collect(file, {tailLines: 100})).toBe('one\ntwo\nthree\nfour\n')
      const big = join(dir, 'big.log')
      writeFileSync(big, Array.from({length: 5000}, (_, i) => formatCriLine('stdout', `line ${i} ${'x'.repeat(40)}`, 'F', t0)).join(''))
      const fh = await open(big)
      const {size} = await fh.stat()
      const start = await tailStart(fh, size, 3000)
      await fh.close()
      const out = await collect(big, {tailLines: 3000})
      expect(out.split('\n')[0]).toMatch(/^line 2000 /)
      expect(out.split('\n')).toHaveLength(3001)
      expect(start).toBeGreaterThan(0)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('RFC3339Nano drops trailing zeros like Go', () => {
    expect(rfc3339Nano('2026-01-02T03:04:05.678000000Z')).toBe('2026-01-02T03:04:05.678Z')
    expect(rfc3339Nano('2026-01-02T03:04:05.000000000Z')).toBe('2026-01-02T03:04:05Z')
    expect(rfc3339Nano('2026-01-02T03:04:05.123456789Z')).toBe('2026-01-02T03:04:05.123456789Z')
  })

  test('follow sends lines as written, survives a rotation, and ends with the container', async () => {
    const dir = tmp()
    try {
      const file = join(dir, '0.log')
      writeFileSync(file, formatCriLine('stdout', 'first'))
      let out = ''
      let ended = false
      const abort = new AbortController()
      const done = readLogFile(file, base, async (c) => void (out += c), {ended: () => ended, signal: abort.signal, pollMs: 20})
      const waitFor = async (text: string) => {
        for (let i = 0; i < 200 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 10))
        expect(out).toContain(text)
      }
      await waitFor('first\n')
      appendFileSync(file, formatCriLine('stdout', 'second'))
      await waitFor('second\n')
      renameSync(file, `${file}.1`)
      writeFileSync(file, formatCriLine('stdout', 'after rotation'))
      await waitFor('after rotation\n')
      appendFileSync(file, formatCriLine('stdout', 'last words'))
      ended = true
      await done
      expect(out).toBe('first\nsecond\nafter rotation\nlast words\n')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('an aborted follow returns at once', async () => {
    const dir = tmp()
    try {
      const file = join(dir, '0.log')
      writeFileSync(file, '')
      const abort = new AbortController()
      const done = readLogFile(file, base, async () => undefined, {ended: () => false, signal: abort.signal, pollMs: 10_000})
      await new Promise((r) => setTimeout(r, 50))
      const t = Date.now()
      abort.abort()
      await done
      expect(Date.now() - t).toBeLessThan(1000)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})

describe('choosing the log file from the pod status', () => {
  const uid = '0b6f1c9e-1111-2222-3333-444455556666'
  function pod(status: V1Pod['status']): V1Pod {
    return {metadata: {name: 'p', namespace: 'ns', uid}, spec: {containers: [{name: 'c'}]}, status}
  }
  function withFiles(dir: string, instances: number[]): void {
    for (const i of instances) {
      const f = containerLogFile(dir, 'ns', 'p', uid, 'c', i)
      mkdirSync(dirname(f), {recursive: true})
      writeFileSync(f, '')
    }
  }

  test('the kubelet messages for a missing pod, container, previous instance and waiting container', () => {
    const dir = tmp()
    try {
      const running = pod({containerStatuses: [{name: 'c', image: 'i', imageID: '', ready: true, restartCount: 0, state: {running: {}}}]})
      expect(planContainerLogs(dir, () => undefined, 'ns', 'p', 'c', false)).toEqual({ok: false, status: 404, message: 'pod "p" does not exist'})
      expect(planContainerLogs(dir, () => running, 'ns', 'p', 'x', false)).toEqual({ok: false, status: 404, message: 'container "x" not found in pod "p"'})
      expect(planContainerLogs(dir, () => running, 'ns', 'p', 'c', true)).toEqual({ok: false, status: 400, message: 'previous terminated container "c" in pod "p" not found'})
      const waiting = pod({containerStatuses: [{name: 'c', image: 'i', imageID: '', ready: false, restartCount: 0, state: {waiting: {reason: 'ContainerCreating'}}}]})
      expect(planContainerLogs(dir, () => waiting, 'ns', 'p', 'c', false)).toEqual({ok: false, status: 400, message: 'container "c" in pod "p" is waiting to start: ContainerCreating'})
      expect(planContainerLogs(dir, () => pod({}), 'ns', 'p', 'c', false)).toMatchObject({status: 400, message: 'container "c" in pod "p" is not available'})
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('current and previous instances after a restart, and during a crash-loop back-off', () => {
    const dir = tmp()
    try {
      withFiles(dir, [0, 1])
      let p = pod({containerStatuses: [{name: 'c', image: 'i', imageID: '', ready: true, restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 1}}}]})
      const cur = planContainerLogs(dir, () => p, 'ns', 'p', 'c', false)
      const prev = planContainerLogs(dir, () => p, 'ns', 'p', 'c', true)
      expect(cur.ok && cur.file).toBe(containerLogFile(dir, 'ns', 'p', uid, 'c', 1))
      expect(prev.ok && prev.file).toBe(containerLogFile(dir, 'ns', 'p', uid, 'c', 0))
      expect(cur.ok && cur.ended()).toBe(false)
      expect(prev.ok && prev.ended()).toBe(true)
      // Back-off: the current state waits; both plain and previous read the last instance that ran.
      p = pod({containerStatuses: [{name: 'c', image: 'i', imageID: '', ready: false, restartCount: 1, state: {waiting: {reason: 'CrashLoopBackOff'}}, lastState: {terminated: {exitCode: 1}}}]})
      const backoff = planContainerLogs(dir, () => p, 'ns', 'p', 'c', false)
      expect(backoff.ok && backoff.file).toBe(containerLogFile(dir, 'ns', 'p', uid, 'c', 1))
      expect(cur.ok && cur.ended()).toBe(true)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
