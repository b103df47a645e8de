import type {DevProgress, InstanceExit, RestoreOutcome} from '../kubectl/dev-report.js'
import {paint} from './color.js'

export interface DevLine {
  /** out: the container's own output, as it wrote it; err: what dev says. */
  stream: 'out' | 'err'
  text: string
}

/** At most this many changed files are named in a line. */
const NamedFiles = 3

function files(paths: string[]): string {
  const named = paths.slice(0, NamedFiles).join(', ')
  return paths.length > NamedFiles ? `${named} and ${paths.length - NamedFiles} more` : named
}

/** An argv as one could type it again: arguments with spaces or quotes single-quoted. */
export function argvText(argv: string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`)).join(' ')
}

function exitText(e: InstanceExit): string {
  const how = e.signal ? `signal ${e.signal}` : `code ${e.exitCode}`
  return `exited with ${how}${e.reason ? ` (${e.reason})` : ''}`
}

function restoreText(workload: string, o: RestoreOutcome): string {
  switch (o.kind) {
    case 'restored':
      return `${workload} scaled back to ${o.replicas}`
    case 'nothing':
      return `${workload} has no saved scale: nothing to restore`
    case 'kept':
      return `${workload} was scaled to ${o.replicas} meanwhile: left so (the saved ${o.saved} dropped)`
  }
}

/**
 * One line per step of dev: the container's log on stdout as it is, dev's
 * own lines on stderr after a `[dev]` mark (so the program's output can be
 * piped apart), failures as `error: ...`.
 */
export function devLine(p: DevProgress, color: boolean): DevLine | undefined {
  const say = (text: string): DevLine => ({stream: 'err', text: `${paint(color, 'cyan', '[dev]')} ${text}`})
  switch (p.kind) {
    case 'log':
      return {stream: 'out', text: p.line}
    case 'scaled-down': {
      const scaled = p.earlier
        ? `${p.workload} stays at 0: an earlier dev saved its ${p.replicas} replicas, kept for the restore`
        : `${p.workload} scaled to 0 (was ${p.replicas}; \`kubectl vnode dev --restore ${p.workload}\` puts it back if dev is killed)`
      const autoscalers = p.autoscalers.map((h) => `horizontalpodautoscaler/${h} targets ${p.workload}: it pauses at 0 replicas and resumes when the scale is restored`)
      return {stream: 'err', text: [scaled, ...autoscalers].map((t) => say(t).text).join('\n')}
    }
    case 'created':
      return say(`pod/${p.pod} created on node ${p.node}: container ${p.container} runs ${argvText(p.command)}`)
    case 'forwarding':
      return say(`forwarding 127.0.0.1:${p.local} -> pod port ${p.pod}`)
    case 'watching':
      return say(`watching ${p.roots.join(', ')} (${p.directories} ${p.directories === 1 ? 'directory' : 'directories'}) for changes`)
    case 'started':
      return say(paint(color, 'green', `container ${p.container} started${p.restartCount > 0 ? ` (restart ${p.restartCount})` : ''}`))
    case 'waiting':
      return say(`container ${p.container} waiting: ${p.reason}${p.message ? ` (${p.message})` : ''}`)
    case 'restart-requested':
      return say(`${files(p.paths)} changed: restarting`)
    case 'restarted':
      return say(paint(color, 'yellow', `container ${p.container} restarted (restart ${p.restartCount}): ${p.files ? `${files(p.files)} changed` : p.exit ? exitText(p.exit) : 'by the node'}`))
    case 'event':
      return say(paint(color, 'yellow', `Warning ${p.reason}: ${p.message}`))
    case 'exited':
      return say(paint(color, p.exit.exitCode === 0 ? 'green' : 'yellow', `container ${p.container} ${exitText(p.exit)}`))
    case 'failed':
      return {stream: 'err', text: `error: the pod failed before its container ran: ${p.reason}${p.message ? `: ${p.message}` : ''}`}
    case 'gone':
      return {stream: 'err', text: `error: pod/${p.pod} was deleted`}
    case 'stopping':
      return say(`${p.why}: stopping`)
    case 'deleting':
      return say(`deleting pod/${p.pod} (grace period ${p.gracePeriodSeconds}s)`)
    case 'deleted':
      return say(`pod/${p.pod} deleted`)
    case 'restore':
      return say(restoreText(p.workload, p.outcome))
    case 'cleaned':
      return say(p.pods.length ? `deleted leftover dev pods: ${p.pods.join(', ')}` : 'no leftover dev pods')
    case 'warning':
      return {stream: 'err', text: `warning: ${p.message}`}
  }
}
