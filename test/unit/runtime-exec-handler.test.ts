import {describe, expect, test} from '@jest/globals'
import {randomBytes} from 'node:crypto'
import {readdirSync, readFileSync} from 'node:fs'
import {runHook} from '../../src/emulator/runtime/probes/handlers.js'

/** Live processes whose argv contains text. */
function processesWith(text: string): number[] {
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text)) out.push(Number(d))
    } catch {
      /* gone */
    }
  }
  return out
}

/**
 * The command an exec handler starts may fork (nsenter does, into the
 * container's PID namespace) and its child holds the output pipes: ending
 * only the first process would leave the exec waiting on them for ever.
 */
describe('exec handlers end with their whole process group', () => {
  const ctx = {env: {PATH: process.env.PATH ?? '/usr/bin:/bin'}, cwd: '/', host: '127.0.0.1', ports: []}
  // A shell whose child (node, with the marker in its argv so the test finds it) keeps stdout open for 30 s.
  const forking = (marker: string) => ({exec: {command: ['/bin/sh', '-c', `"$0" -e 'setTimeout(() => {}, 30000)' ${marker} & wait`, process.execPath]}})
  const marker = () => `exec-handler-${randomBytes(4).toString('hex')}`

  test('a timeout ends the command and its children, and says it timed out', async () => {
    const m = marker()
    const started = Date.now()
    const r = await runHook(forking(m), ctx, 300)
    expect(Date.now() - started).toBeLessThan(3_000)
    expect(r).toMatchObject({result: 'failure'})
    expect(r.output).toMatch(/timed out$/)
    expect(processesWith(m)).toEqual([])
  })

  test('an abort (the preStop hook at the grace deadline) ends the command and its children', async () => {
    const m = marker()
    const abort = new AbortController()
    const started = Date.now()
    const hook = runHook(forking(m), ctx, 60_000, abort.signal)
    await new Promise((r) => setTimeout(r, 300))
    abort.abort()
    const r = await hook
    expect(Date.now() - started).toBeLessThan(3_000)
    expect(r.result).toBe('failure')
    expect(processesWith(m)).toEqual([])
  })
})
