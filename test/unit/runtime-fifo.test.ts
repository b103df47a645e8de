import {describe, expect, test} from '@jest/globals'
import {lstatSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {FifoMaker} from '../../src/emulator/runtime/process/fifo.js'

describe('FifoMaker', () => {
  test('a burst of requests becomes a few mkfifo runs; every pipe is a 0600 FIFO; a bad path fails only its own request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-fifo-'))
    try {
      const maker = new FifoMaker()
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
      // Later requests still work once the queue drained.
      await maker.make([join(dir, 'late.out')])
      expect(lstatSync(join(dir, 'late.out')).isFIFO()).toBe(true)
      expect(maker.runs).toBeLessThanOrEqual(3)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
