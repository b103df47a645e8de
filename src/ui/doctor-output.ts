import {type DoctorCheck, type DoctorReport, Families, FamilyNames, type Fix} from '../kubectl/doctor-report.js'
import {paint} from './color.js'

const VerdictColor = {ok: 'green', missing: 'red', off: 'yellow'} as const

/** The fix's lines: the words, then the command for this host's family (every family's when it is not known). */
export function fixLines(fix: Fix, family: DoctorReport['host']['family']): string[] {
  const out: string[] = []
  if (fix.text) out.push(fix.text)
  if (fix.command) out.push(fix.command)
  if (fix.byFamily) {
    if (family && fix.byFamily[family]) out.push(fix.byFamily[family])
    else for (const f of Families) if (fix.byFamily[f]) out.push(`${FamilyNames[f]}: ${fix.byFamily[f]}`)
  }
  return out
}

/**
 * The report as text: a line about the host and the cluster, one row per
 * capability (its verdict and why), and under a row that is not ok what it
 * costs and the fix; the mode line last.
 */
export function doctorText(report: DoctorReport, opts: {color: boolean}): string {
  const width = Math.max(...report.checks.map((c) => c.capability.length))
  const lines = [`host: ${report.host.os}, uid ${report.host.uid}`]
  const row = (c: DoctorCheck) => {
    const verdict = paint(opts.color, VerdictColor[c.verdict], c.verdict.padEnd(7))
    lines.push(`${c.capability.padEnd(width)}  ${verdict}  ${c.why}${c.unmet ? paint(opts.color, 'red', ' (asked for: cannot work)') : ''}`)
    if (c.verdict === 'ok') return
    const indent = ' '.repeat(width + 2 + 7 + 2)
    if (c.cost) lines.push(`${indent}without it: ${c.cost}`)
    const fix = c.fix ? fixLines(c.fix, report.host.family) : []
    fix.forEach((l, i) => lines.push(`${indent}${i === 0 ? 'fix: ' : '     '}${l}`))
  }
  report.checks.forEach(row)
  lines.push(report.mode)
  return lines.join('\n') + '\n'
}
