import type {KillProgress} from '../kubectl/kill-report.js'
import {formatElapsed} from '../kubectl/duration.js'
import {paint} from './color.js'

export interface KillLine {
  stream: 'out' | 'err'
  text: string
}

/**
 * One progress line per step of a kill, with the time since the command
 * started; failures go to stderr in kubectl's words.
 */
export function killProgressLine(p: KillProgress, opts: {color: boolean; describe: (e: unknown) => string}): KillLine | undefined {
  const who = `pod/${p.target.name}`
  const at = 'elapsedMs' in p ? paint(opts.color, 'dim', `[${formatElapsed(p.elapsedMs).padStart(6)}]`) + ' ' : ''
  switch (p.kind) {
    case 'not-found':
      return {stream: 'err', text: `error: pods "${p.target.name}" not found`}
    case 'failed':
      return {stream: 'err', text: opts.describe(p.error)}
    case 'requested':
      return {
        stream: 'out',
        text: `${at}${who} deletion requested (grace period ${p.gracePeriodSeconds}s${p.removed ? ', removed at once' : ''})`,
      }
    case 'status':
      return {stream: 'out', text: `${at}${who} status ${paint(opts.color, p.status === 'Terminating' ? 'magenta' : 'bold', p.status)}`}
    case 'event':
      return {stream: 'out', text: `${at}${who} ${p.reason}: ${p.message}`}
    case 'container': {
      const how = p.signal ? `signal ${p.signal}` : `exit code ${p.exitCode ?? '?'}`
      const failed = (p.exitCode ?? 0) !== 0 || !!p.signal
      return {stream: 'out', text: `${at}${who} container ${p.container} exited: ${paint(opts.color, failed ? 'yellow' : 'green', how)}${p.reason ? ` (${p.reason})` : ''}`}
    }
    case 'removed':
      return {stream: 'out', text: `${at}${who} removed: pod "${p.target.name}" deleted`}
    case 'timeout':
      return {stream: 'err', text: `error: timed out waiting for ${who} to be removed (gave up after ${formatElapsed(p.elapsedMs)})`}
  }
}
