import {afterAll} from '@jest/globals'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

const made: string[] = []

// Imported by a test file, this registers in that file: its directories go when its tests are done.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, {recursive: true, force: true})
})

/** A fresh directory under the system temp dir, removed after the test file's last test. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}
