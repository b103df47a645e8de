import {describe, expect, test} from '@jest/globals'
import {containerLogFile, formatCriLine, parseCriLine} from '../../src/emulator/runtime/logs/layout.js'

describe('CRI log layout and format', () => {
  test('one file per restart under namespace_pod_uid/container', () => {
    expect(containerLogFile('/s', 'ns', 'p', 'u1', 'c', 2)).toBe('/s/logs/ns_p_u1/c/2.log')
  })

  test('a formatted line parses back, keeping spaces in the content', () => {
    const t = new Date('2026-01-02T03:04:05.678Z')
    const line = formatCriLine('stderr', 'hello  world', 'F', t)
    expect(line).toBe('2026-01-02T03:04:05.678000000Z stderr F hello  world\n')
    const parsed = parseCriLine(line)!
    expect(parsed.stream).toBe('stderr')
    expect(parsed.content).toBe('hello  world')
    expect(parsed.time.getTime()).toBe(t.getTime())
    expect(parseCriLine('garbage')).toBeUndefined()
  })
})
