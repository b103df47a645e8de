import {describe, expect, test} from '@jest/globals'
import {tempDir} from './temp-dirs.js'
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {PassThrough} from 'node:stream'
import {parseCriLine} from '../../src/emulator/runtime/logs/layout.js'
import {ContainerLogWriter, MaxCriRecordChars} from '../../src/emulator/runtime/logs/writer.js'
import {readLogTail} from '../../src/emulator/runtime/logs/reader.js'

function records(path: string) {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => parseCriLine(l)!)
}

describe('CRI log writer', () => {
  test('lines split across chunks, long lines as P records, the unterminated end as F', async () => {
    const path = join(tempDir('vnode-log-'), '0.log')
    const w = new ContainerLogWriter(path)
    const out = new PassThrough()
    const err = new PassThrough()
    const done = Promise.all([w.attach(out, 'stdout'), w.attach(err, 'stderr')])
    out.write('hel')
    out.write('lo\nwor')
    err.write('oops\n')
    out.write('ld\n' + 'x'.repeat(MaxCriRecordChars + 10) + '\nend')
    out.end()
    err.end()
    await done
    w.close()
    const recs = records(path)
    expect(recs.map((r) => [r.stream, r.tag, r.content.length > 20 ? r.content.length : r.content])).toEqual([
      ['stdout', 'F', 'hello'],
      ['stderr', 'F', 'oops'],
      ['stdout', 'F', 'world'],
      ['stdout', 'P', MaxCriRecordChars],
      ['stdout', 'F', 'xxxxxxxxxx'],
      ['stdout', 'F', 'end'],
    ])
    const times = recs.map((r) => r.timestamp)
    expect([...times].sort()).toEqual(times)
    expect(new Set(times).size).toBe(times.length)
  })

  test('rotates at maxBytes keeping maxFiles files', async () => {
    const dir = tempDir('vnode-log-')
    const path = join(dir, '0.log')
    const w = new ContainerLogWriter(path, {maxBytes: 500, maxFiles: 3})
    const s = new PassThrough()
    const done = w.attach(s, 'stdout')
    for (let i = 0; i < 100; i++) s.write(`line ${i}\n`)
    s.end()
    await done
    w.close()
    expect(existsSync(`${path}.1`)).toBe(true)
    expect(existsSync(`${path}.2`)).toBe(true)
    expect(existsSync(`${path}.3`)).toBe(false)
    const kept = [...records(`${path}.2`), ...records(`${path}.1`), ...records(path)].map((r) => r.content)
    expect(kept.at(-1)).toBe('line 99')
    expect(kept).not.toContain('line 0')
    // Contiguous: nothing lost between the kept files.
    const first = Number(kept[0].split(' ')[1])
    expect(kept).toEqual(Array.from({length: 100 - first}, (_, i) => `line ${first + i}`))
  })

  test('tail for FallbackToLogsOnError: last 80 lines, at most 2048 bytes', async () => {
    const path = join(tempDir('vnode-log-'), '0.log')
    const w = new ContainerLogWriter(path)
    const s = new PassThrough()
    const done = w.attach(s, 'stdout')
    for (let i = 0; i < 100; i++) s.write(`l${i}\n`)
    s.end()
    await done
    w.close()
    const tail = readLogTail(path)
    expect(tail.split('\n').filter(Boolean)).toHaveLength(80)
    expect(tail.endsWith('l99\n')).toBe(true)
    expect(readLogTail(path, 80, 10)).toBe('l97\nl98\nl99\n'.slice(-10))
    expect(readLogTail(join(path, 'missing'))).toBe('')
  })
})
