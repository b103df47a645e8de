import {describe, expect, test} from '@jest/globals'
import {mkdirSync, readFileSync, statSync, truncateSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {LegacyPodRecordFile, PodRecordSlots, PodRecordWriter, readPodRecord, type PodRecord} from '../../src/emulator/runtime/pod/record.js'
import {tempDir} from './temp-dirs.js'

function record(sandbox: string, restartCount: number): PodRecord {
  return {
    version: 1,
    uid: 'u1',
    namespace: 'ns',
    name: 'p',
    sandbox,
    links: [],
    updatedAt: new Date(0).toISOString(),
    containers: [{name: 'app', kind: 'regular', running: true, restartCount, containerID: 'vnode://abc'}],
  }
}

const restarts = (r: PodRecord | undefined) => r?.containers[0]?.restartCount

describe("a pod's record: two files written in place, in turns", () => {
  test('each write goes to the file not holding the newest record, numbered one above it; the reader takes the newest', () => {
    const sandbox = join(tempDir('vnode-record-'), 'pod')
    const w = new PodRecordWriter()
    w.write(record(sandbox, 0))
    w.write(record(sandbox, 1))
    w.write(record(sandbox, 2))
    const [a, b] = PodRecordSlots.map((f) => JSON.parse(readFileSync(join(sandbox, f), 'utf8')) as PodRecord)
    expect([a!.seq, b!.seq].sort()).toEqual([2, 3])
    expect(restarts(readPodRecord(sandbox))).toBe(2)
    expect(statSync(sandbox).mode & 0o777).toBe(0o700)
    for (const f of PodRecordSlots) expect(statSync(join(sandbox, f)).mode & 0o777).toBe(0o600)
  })

  test('no new file per write: the two files keep their inodes', () => {
    const sandbox = join(tempDir('vnode-record-'), 'pod')
    const w = new PodRecordWriter()
    w.write(record(sandbox, 0))
    w.write(record(sandbox, 0))
    const inodes = PodRecordSlots.map((f) => statSync(join(sandbox, f)).ino)
    for (let i = 1; i <= 5; i++) w.write(record(sandbox, i))
    expect(PodRecordSlots.map((f) => statSync(join(sandbox, f)).ino)).toEqual(inodes)
    expect(restarts(readPodRecord(sandbox))).toBe(5)
  })

  test('a write cut short leaves the record before it whole in the other file', () => {
    const sandbox = join(tempDir('vnode-record-'), 'pod')
    const w = new PodRecordWriter()
    w.write(record(sandbox, 0))
    w.write(record(sandbox, 1))
    w.write(record(sandbox, 2))
    // seq 3 is the newest: cut it short (empty, then half-written), as a vnode killed in the write leaves it.
    const newest = join(sandbox, PodRecordSlots[3 % 2]!)
    const text = readFileSync(newest, 'utf8')
    writeFileSync(newest, text.slice(0, text.length / 2))
    expect(restarts(readPodRecord(sandbox))).toBe(1)
    truncateSync(newest, 0)
    expect(restarts(readPodRecord(sandbox))).toBe(1)
  })

  test('a writer after a restart goes on from the numbers on disk, never over the newest record', () => {
    const sandbox = join(tempDir('vnode-record-'), 'pod')
    const first = new PodRecordWriter()
    for (let i = 0; i < 3; i++) first.write(record(sandbox, i))
    const next = new PodRecordWriter()
    next.write(record(sandbox, 7))
    expect(readPodRecord(sandbox)?.seq).toBe(4)
    expect(restarts(readPodRecord(sandbox))).toBe(7)
    // The record before it (seq 3) is still whole in the other file.
    const other = JSON.parse(readFileSync(join(sandbox, PodRecordSlots[3 % 2]!), 'utf8')) as PodRecord
    expect([other.seq, restarts(other)]).toEqual([3, 2])
  })

  test("an earlier vnode's single record.json is read, and the two files win over it once written", () => {
    const sandbox = join(tempDir('vnode-record-'), 'pod')
    new PodRecordWriter().write(record(sandbox, 0))
    writeFileSync(join(sandbox, LegacyPodRecordFile), JSON.stringify(record(sandbox, 9)))
    expect(restarts(readPodRecord(sandbox))).toBe(0)
    const legacyOnly = join(tempDir('vnode-record-'), 'pod')
    mkdirSync(legacyOnly)
    writeFileSync(join(legacyOnly, LegacyPodRecordFile), JSON.stringify(record(legacyOnly, 9)))
    expect(restarts(readPodRecord(legacyOnly))).toBe(9)
    expect(readPodRecord(join(legacyOnly, 'missing'))).toBeUndefined()
  })
})
