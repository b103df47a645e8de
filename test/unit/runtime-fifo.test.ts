import {describe, expect, test} from '@jest/globals'
import {existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {FifoMaker} from '../../src/emulator/runtime/process/fifo.js'
import {RefillHolds} from '../../src/common/refill-holds.js'
import {helpers} from '../../src/emulator/runtime/process/helper-runner.js'

describe('FifoMaker', () => {
  test('a burst of requests becomes a few mkfifo runs; every pipe is a 0600 FIFO; a bad path fails only its own request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    try {
      const maker = new FifoMaker()
      const helperRuns = helpers.helperRuns
      const paths = Array.from({length: 40}, (_, i) => [join(dir, `c${i}.out`), join(dir, `c${i}.err`)])
      const bad = maker.make([join(dir, 'missing-dir', 'x.out'), join(dir, 'missing-dir', 'x.err')])
      const results = await Promise.allSettled([...paths.map((p) => maker.make(p)), bad])
      expect(results.slice(0, 40).every((r) => r.status === 'fulfilled')).toBe(true)
      const failed = results[40]
      expect(failed.status).toBe('rejected')
      expect(String((failed as PromiseRejectedResult).reason.message)).toContain('missing-dir')
      for (const p of paths.flat()) {
        const st = lstatSync(p)
        expect(st.isFIFO()).toBe(true)
        expect(st.mode & 0o777).toBe(0o600)
      }
      expect(maker.runs).toBeLessThanOrEqual(2)
      // The node's helper ran each mkfifo (perl is part of every supported host): vnode did not fork itself for one.
      expect(helpers.canSpawn).toBe(true)
      expect(helpers.helperRuns - helperRuns).toBe(maker.runs)
      // Later requests still work once the queue drained.
      await maker.make([join(dir, 'late.out')])
      expect(lstatSync(join(dir, 'late.out')).isFIFO()).toBe(true)
      expect(maker.runs).toBeLessThanOrEqual(3)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('a reserve serves starts by rename, is topped up once below half, and goes at close', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    const spareDir = join(dir, 'pipes')
    try {
      // What a killed vnode left in the reserve's directory is removed.
      mkdirSync(spareDir, {mode: 0o700})
      writeFileSync(join(spareDir, 'left'), '')
      const maker = new FifoMaker(256, {dir: spareDir, size: 8, quietMs: 10})
      await maker.prepare()
      expect(maker.runs).toBe(1)
      expect(maker.reserved).toBe(8)
      expect(readdirSync(spareDir)).toHaveLength(8)
      expect(existsSync(join(spareDir, 'left'))).toBe(false)
      expect(lstatSync(spareDir).mode & 0o777).toBe(0o700)
      // Two starts from the reserve: no mkfifo runs, the pipes are where they were asked for.
      await maker.make([join(dir, 'a.out'), join(dir, 'a.err')])
      await maker.make([join(dir, 'b.out'), join(dir, 'b.err')])
      expect(maker.runs).toBe(1)
      expect(maker.reserved).toBe(4)
      for (const p of ['a.out', 'a.err', 'b.out', 'b.err']) {
        const st = lstatSync(join(dir, p))
        expect(st.isFIFO()).toBe(true)
        expect(st.mode & 0o777).toBe(0o600)
      }
      // Below half: one run tops it up once starts are quiet.
      await maker.make([join(dir, 'c.out'), join(dir, 'c.err')])
      await maker.idle()
      expect(maker.runs).toBe(2)
      expect(maker.reserved).toBe(8)
      expect(readdirSync(spareDir)).toHaveLength(8)
      await maker.close()
      expect(existsSync(spareDir)).toBe(false)
      expect(lstatSync(join(dir, 'c.out')).isFIFO()).toBe(true)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('a reserve whose directory went: starts still get their pipes, made by mkfifo, and the reserve is given up', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    const spareDir = join(dir, 'pipes')
    try {
      const maker = new FifoMaker(256, {dir: spareDir, size: 4, quietMs: 10})
      await maker.prepare()
      rmSync(spareDir, {recursive: true})
      // The spares named in the maker are gone: the rename fails, mkfifo makes the start's pipes, and the reserve is given up.
      await maker.make([join(dir, 'a.out'), join(dir, 'a.err')])
      expect(lstatSync(join(dir, 'a.out')).isFIFO()).toBe(true)
      await maker.idle()
      expect(maker.runs).toBe(2)
      expect(maker.reserved).toBe(0)
      await maker.make([join(dir, 'b.out'), join(dir, 'b.err')])
      expect(lstatSync(join(dir, 'b.err')).isFIFO()).toBe(true)
      await maker.idle()
      expect(maker.reserved).toBe(0)
      expect(maker.runs).toBe(3)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('while starts keep taking pipes, the reserve is not topped up; once they stop, it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    try {
      const maker = new FifoMaker(256, {dir: join(dir, 'pipes'), size: 12, quietMs: 80})
      await maker.prepare()
      expect(maker.runs).toBe(1)
      for (let i = 0; i < 6; i++) {
        await maker.make([join(dir, `${i}.out`), join(dir, `${i}.err`)])
        await new Promise((r) => setTimeout(r, 20))
      }
      // Below half since the fourth start, but every start came within the quiet time of the one before.
      expect(maker.runs).toBe(1)
      expect(maker.reserved).toBe(0)
      await maker.idle()
      expect(maker.runs).toBe(2)
      expect(maker.reserved).toBe(12)
      await maker.close()
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  test('a pod starting or stopping holds the top-up; its release lets it go once quiet', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    try {
      const holds = new RefillHolds(() => Date.now())
      const maker = new FifoMaker(256, {dir: join(dir, 'pipes'), size: 4, quietMs: 10}, holds)
      await maker.prepare()
      const release = holds.add()
      await maker.make([join(dir, 'a.out'), join(dir, 'a.err')])
      await maker.make([join(dir, 'b.out'), join(dir, 'b.err')])
      await new Promise((r) => setTimeout(r, 100))
      // Ten quiet times went by, held all along.
      expect(maker.runs).toBe(1)
      expect(maker.reserved).toBe(0)
      release()
      release()
      await maker.idle()
      expect(maker.runs).toBe(2)
      expect(maker.reserved).toBe(4)
      await maker.close()
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
