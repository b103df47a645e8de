import {afterEach, describe, expect, test} from '@jest/globals'
import {tempDir} from './temp-dirs.js'
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {findPodRecords, isSameProcess, LostContainerMessage, restoreContainer} from '../../src/emulator/runtime/pod/adoption.js'
import type {ContainerRecord} from '../../src/emulator/runtime/pod/record.js'
import {readStat} from '../../src/emulator/runtime/process/proc.js'
import {ContainerProcess} from '../../src/emulator/runtime/process/container-process.js'
import {outputPipes} from '../../src/emulator/runtime/process/instance-io.js'

const children: ChildProcess[] = []
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL')
})

function sleeper(): ChildProcess {
  const c = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], {detached: true, stdio: 'ignore'})
  children.push(c)
  return c
}

const base = (over: Partial<ContainerRecord>): ContainerRecord => ({name: 'app', kind: 'regular', running: true, restartCount: 2, containerID: 'vnode://abc', ...over})

describe('adoption', () => {
  test('a live process with the recorded start time is the same process; another start time is not', () => {
    const c = sleeper()
    const ticks = readStat(c.pid!)!.startTime
    expect(isSameProcess(c.pid, ticks)).toBe(true)
    expect(isSameProcess(c.pid, ticks - 1)).toBe(false)
    expect(isSameProcess(c.pid, undefined)).toBe(false)
  })

  test('a reused pid (different start time) is reported lost and the process there is left alone', async () => {
    const c = sleeper()
    const dir = tempDir('adopt-')
    const r = restoreContainer(base({pid: c.pid, startTicks: readStat(c.pid!)!.startTime + 5, logPath: join(dir, '0.log')}), undefined)
    expect(r.proc).toBeUndefined()
    expect(r.history[0]).toMatchObject({exitCode: 137, reason: 'ContainerStatusUnknown', message: LostContainerMessage})
    expect(r.instances).toBe(3)
    await new Promise((res) => setTimeout(res, 100))
    expect(readStat(c.pid!)).toBeDefined()
  })

  test('a live recorded process is adopted; its end is noticed without an exit status', async () => {
    const c = sleeper()
    const dir = tempDir('adopt-')
    const r = restoreContainer(base({pid: c.pid, startTicks: readStat(c.pid!)!.startTime, logPath: join(dir, '2.log'), startedAt: '2026-01-02T03:04:05.000Z'}), undefined, 20)
    expect(r.proc?.pid).toBe(c.pid)
    expect(r.proc?.startedAt.toISOString()).toBe('2026-01-02T03:04:05.000Z')
    c.kill('SIGKILL')
    const exit = await r.proc!.exited
    expect(exit.unknown).toBe(true)
  })

  test('an adopted process whose pid now belongs to another process never signals that process', async () => {
    const c = sleeper()
    const dir = tempDir('adopt-')
    // As if the recorded process ended and the kernel gave its pid to this one.
    const proc = ContainerProcess.adopt(
      {pid: c.pid!, startTicks: readStat(c.pid!)!.startTime + 7, startedAt: new Date(), env: {}, cwd: '/', logPath: join(dir, '0.log'), pipes: outputPipes(join(dir, 'none'))},
      20,
    )
    proc.signal('SIGKILL')
    const exit = await proc.exited
    expect(exit.unknown).toBe(true)
    await proc.terminate(() => 0)
    await new Promise((res) => setTimeout(res, 100))
    expect(readStat(c.pid!)?.state).not.toBe('Z')
    expect(readStat(c.pid!)).toBeDefined()
  })

  test('a process reaped before its exit reaches the node does not run now, though the node has not seen it end (a stop gives it no Killing)', async () => {
    const c = sleeper()
    const dir = tempDir('adopt-')
    // Polled 2 s apart: the exit reaches the process object long after the kernel has reaped the process.
    const proc = ContainerProcess.adopt(
      {pid: c.pid!, startTicks: readStat(c.pid!)!.startTime, startedAt: new Date(), env: {}, cwd: '/', logPath: join(dir, '0.log'), pipes: outputPipes(join(dir, 'none'))},
      2_000,
    )
    expect(proc.runsNow()).toBe(true)
    const reaped = new Promise((res) => c.once('exit', res))
    c.kill('SIGKILL')
    await reaped
    expect(readStat(c.pid!)).toBeUndefined()
    expect({running: proc.running, runsNow: proc.runsNow()}).toEqual({running: true, runsNow: false})
    expect((await proc.exited).unknown).toBe(true)
    expect(proc.runsNow()).toBe(false)
  })

  test('a finished container keeps its recorded exit', () => {
    const r = restoreContainer(base({running: false, lastExit: {exitCode: 3, reason: 'Error', finishedAt: '2026-01-02T03:04:05.000Z'}}), undefined)
    expect(r.proc).toBeUndefined()
    expect(r.history).toEqual([{exitCode: 3, reason: 'Error', startedAt: undefined, finishedAt: new Date('2026-01-02T03:04:05.000Z')}])
  })

  test('a container that never ran has no instances', () => {
    expect(restoreContainer(base({running: false, containerID: undefined, restartCount: 0}), undefined).instances).toBe(0)
  })

  test('records are read per pod directory; unreadable or mismatched ones are skipped', () => {
    const state = tempDir('adopt-state-')
    const write = (dir: string, text: string) => {
      mkdirSync(join(state, 'pods', dir), {recursive: true})
      writeFileSync(join(state, 'pods', dir, 'record.json'), text)
    }
    write('u1', JSON.stringify({version: 1, uid: 'u1', namespace: 'n', name: 'a', sandbox: '/x', containers: [], links: [], updatedAt: ''}))
    write('u2', '{not json')
    write('u3', JSON.stringify({version: 1, uid: 'other', namespace: 'n', name: 'b', sandbox: '/y', containers: [], links: [], updatedAt: ''}))
    write('u4', JSON.stringify({version: 2, uid: 'u4'}))
    expect(findPodRecords(state).map((r) => r.uid)).toEqual(['u1'])
    expect(findPodRecords(join(state, 'missing'))).toEqual([])
  })
})
