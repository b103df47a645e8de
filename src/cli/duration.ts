import {UserError} from '../errors.js'

const Units: Record<string, number> = {ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000}

/**
 * A Go duration as kubectl's flags take it (`500ms`, `30s`, `1m30s`, `2h`),
 * in milliseconds. With bareSeconds, a plain number means seconds, as
 * --request-timeout allows ("0" disables it).
 */
export function parseDuration(flag: string, text: string, opts: {bareSeconds?: boolean} = {}): number {
  const s = text.trim()
  if (opts.bareSeconds && /^\d+$/.test(s)) return Number(s) * 1000
  if (s === '0') return 0
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy
  let total = 0
  let matched = 0
  let m: RegExpExecArray | null
  while ((m = re.exec(s))) {
    total += Number(m[1]) * Units[m[2]]
    matched = re.lastIndex
  }
  if (!s || matched !== s.length) {
    throw new UserError(`invalid ${flag} "${text}": expected a duration such as 30s, 5m or 1h${opts.bareSeconds ? ' (or a number of seconds)' : ''}`)
  }
  return total
}
