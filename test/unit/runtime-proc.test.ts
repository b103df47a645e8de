import {describe, expect, test} from '@jest/globals'
import {spawn} from 'node:child_process'
import {descendants, groupMembers, isGroupAlive, processCpuSeconds, processGroups, readStat} from '../../src/emulator/runtime/process/proc.js'
import {processGroupUsage} from '../../src/emulator/runtime/process/usage.js'
import {checkRelativePath} from '../../src/emulator/runtime/volumes/volumes.js'

describe('/proc helpers', () => {
  test('a process group with only a zombie left counts as gone, though kill(-pgid, 0) still succeeds', async () => {
    // A parent (own group) forks a child into a new group of its own; the child exits and is never reaped.
    // perl is in every Debian (perl-base is essential); a host without it fails here rather than skip.
    const script = 'my $pid = fork(); if ($pid == 0) { setpgrp(0, 0); exit 0 } $| = 1; print "$pid\\n"; sleep 30'
    const parent = spawn('perl', ['-e', script], {stdio: ['ignore', 'pipe', 'inherit'], detached: true})
    try {
      const pid = Number(await new Promise<string>((r) => parent.stdout.once('data', (d: Buffer) => r(d.toString().trim()))))
      for (let i = 0; i < 50 && readStat(pid)?.state !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20))
      expect(readStat(pid)!.state).toBe('Z')
      expect(readStat(pid)!.pgrp).toBe(pid)
      expect(() => process.kill(-pid, 0)).not.toThrow()
      expect(isGroupAlive(pid)).toBe(false)
      expect(isGroupAlive(parent.pid!)).toBe(true)
      expect(groupMembers(parent.pid!).map((p) => p.pid)).toContain(parent.pid)
    } finally {
      process.kill(-parent.pid!, 'SIGKILL')
    }
  })

  test('a group whose leader is gone is alive while another member runs, and gone once it ends', async () => {
    const leader = spawn('sh', ['-c', 'sleep 30 >/dev/null & echo $!'], {stdio: ['ignore', 'pipe', 'inherit'], detached: true})
    const exited = new Promise((r) => leader.once('exit', r))
    const member = Number(await new Promise<string>((r) => leader.stdout.once('data', (d: Buffer) => r(d.toString().trim()))))
    await exited
    try {
      expect(readStat(leader.pid!)).toBeUndefined()
      expect(readStat(member)!.pgrp).toBe(leader.pid)
      expect(isGroupAlive(leader.pid!)).toBe(true)
    } finally {
      process.kill(member, 'SIGKILL')
    }
    for (let i = 0; i < 100 && isGroupAlive(leader.pid!); i++) await new Promise((r) => setTimeout(r, 20))
    expect(isGroupAlive(leader.pid!)).toBe(false)
  })

  test('processGroups: the members of several groups from one pass, as groupMembers finds them one by one', async () => {
    const groups = Array.from({length: 3}, () => spawn('sh', ['-c', 'sleep 30 & sleep 30; wait'], {stdio: 'ignore', detached: true}))
    try {
      const pgids = groups.map((g) => g.pid!)
      let all = new Map<number, unknown[]>()
      for (let i = 0; i < 100; i++) {
        all = processGroups(new Set(pgids))
        if (pgids.every((p) => all.get(p)?.length === 3)) break
        await new Promise((r) => setTimeout(r, 20))
      }
      for (const p of pgids) {
        expect(all.get(p)).toHaveLength(3)
        expect(
          groupMembers(p)
            .map((m) => m.pid)
            .sort(),
        ).toEqual((all.get(p) as {pid: number}[]).map((m) => m.pid).sort())
      }
      expect(processGroups(new Set([pgids[0]])).has(pgids[1])).toBe(false)
      expect(processGroups(new Set()).size).toBe(0)
    } finally {
      for (const g of groups) process.kill(-g.pid!, 'SIGKILL')
    }
  })

  test("processCpuSeconds: a process's run time from its threads, as its own getrusage tells it, not the ticks alone", async () => {
    // The child burns 150 ms of CPU, says how much its getrusage counted, then waits.
    const script = 'const t = () => {const u = process.cpuUsage(); return (u.user + u.system) / 1e6}; while (t() < 0.15) {}; console.log(t()); setInterval(() => {}, 1000)'
    const child = spawn(process.execPath, ['-e', script], {stdio: ['ignore', 'pipe', 'inherit']})
    try {
      const own = Number(await new Promise<string>((r) => child.stdout.once('data', (d: Buffer) => r(d.toString().trim()))))
      const stat = readStat(child.pid!)!
      const seconds = processCpuSeconds(stat)
      expect(seconds).toBeGreaterThanOrEqual(own * 0.9)
      expect(seconds).toBeLessThan(own + 1)
      expect(seconds).toBeGreaterThanOrEqual((stat.utime + stat.stime) / 100)
      // An instance's figure never goes back, though its live threads' sum may (a thread that ends): here, a reading of
      // the stat alone, less than the one before.
      const instance = {}
      const first = processGroupUsage('c', child.pid!, undefined, [stat], instance).cpuSeconds
      expect(first).toBeGreaterThanOrEqual(seconds)
      expect(processGroupUsage('c', child.pid!, undefined, [{...stat, pid: -1, utime: 0, stime: 0}], instance).cpuSeconds).toBe(first)
      // Gone: the ticks read before are all there is.
      child.kill('SIGKILL')
      await new Promise((r) => child.once('exit', r))
      expect(processCpuSeconds({...stat, utime: 7, stime: 3})).toBe(0.1)
    } finally {
      child.kill('SIGKILL')
    }
  })

  test('readStat parses a command name with spaces and parentheses', () => {
    const s = readStat(process.pid)!
    expect(s.pid).toBe(process.pid)
    expect(s.state).toMatch(/[RS]/)
    expect(s.startTime).toBeGreaterThan(0)
    expect(readStat(2 ** 30)).toBeUndefined()
  })

  test('descendants: children and grandchildren with their command names, not the process itself or others', async () => {
    // A shell whose own child is a sleep: two levels below this process.
    const child = spawn('sh', ['-c', 'sleep 30 & wait'], {stdio: 'ignore'})
    try {
      const found = await (async () => {
        for (let i = 0; i < 100; i++) {
          const d = descendants(process.pid).filter((p) => p.pid === child.pid || p.ppid === child.pid)
          if (d.some((p) => p.comm === 'sleep')) return d
          await new Promise((r) => setTimeout(r, 20))
        }
        return []
      })()
      expect(found.map((p) => p.comm).sort()).toEqual(['sh', 'sleep'])
      expect(descendants(process.pid).some((p) => p.pid === process.pid)).toBe(false)
      expect(descendants(child.pid!).map((p) => p.comm)).toEqual(['sleep'])
    } finally {
      // The sleep first: once the shell is gone it is no longer below it.
      for (const p of descendants(child.pid!)) process.kill(p.pid, 'SIGKILL')
      process.kill(child.pid!, 'SIGKILL')
    }
  })
})

describe('volume paths', () => {
  test.each([
    ['a/b', undefined],
    ['..data', undefined],
    ['../x', `p "../x": must not contain '..'`],
    ['a/../../x', `p "a/../../x": must not contain '..'`],
    ['/etc/passwd', `p "/etc/passwd": must be a relative path`],
    ['', 'p: must not be empty'],
  ])('%j', (p, want) => expect(checkRelativePath(p, 'p')).toBe(want))
})
