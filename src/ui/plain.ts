import type {V1Pod} from '@kubernetes/client-node'
import type {Emulator} from '../emulator/emulator.js'
import {podReady, podRestarts, podStatus} from '../kubectl/pod-status.js'

export type OutputFormat = 'plain' | 'json'

/**
 * The non-TTY renderer: one line per change, like `kubectl get -w`, or one
 * JSON object per line with -o json. Returns a function that detaches it.
 */
export function attachPlainRenderer(emulator: Emulator, format: OutputFormat, out: NodeJS.WritableStream = process.stdout, node?: string): () => void {
  const lines = new LineBatch(out)
  const write = (kind: string, text: string, extra: Record<string, unknown> = {}) => {
    const time = new Date()
    if (format === 'json') lines.push(`${JSON.stringify({time: time.toISOString(), kind, message: text, ...(node ? {node} : {}), ...extra})}\n`)
    else lines.push(`${time.toISOString().slice(11, 19)} ${node ? `${node} ` : ''}${kind.padEnd(8)} ${text}\n`)
  }
  let lastConditions = ''
  // The last line printed per pod UID: a line is printed only when READY, STATUS or the restart count change.
  const lastPodLine = new Map<string, string>()
  const handlers = {
    pod: (pod: V1Pod) => {
      const uid = pod.metadata?.uid ?? ''
      const row = podLine(pod)
      const key = `${row.ready} ${row.status} ${row.restartCount}`
      if (lastPodLine.get(uid) === key) return
      lastPodLine.set(uid, key)
      // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the line carries RESTARTS as printed, not the bare count
      const {restartCount: _, ...fields} = row
      write('pod', `${row.namespace}/${row.name} ${row.ready} ${row.status} ${row.restarts}`, fields)
    },
    podRemoved: (uid: string) => void lastPodLine.delete(uid),
    step: (step: string, detail: string) => write('step', detail, {step}),
    node: (s: {conditions: {type?: string; status?: string}[]}) => {
      const summary = s.conditions.map((c) => `${c.type}=${c.status}`).join(' ')
      if (summary && summary !== lastConditions) {
        lastConditions = summary
        write('node', summary, {conditions: s.conditions})
      }
    },
    event: (e: {type: string; reason: string; message: string; object: {kind?: string; name?: string}}) =>
      write('event', `${e.type} ${e.reason} ${e.object.kind}/${e.object.name}: ${e.message}`, {type: e.type, reason: e.reason}),
    error: (m: string) => write('error', m),
    stopping: (d: string) => write('stopping', d),
    stats: (s: {requests: number; openWatches: number; podState: Record<string, number>}) =>
      write('stats', `${s.requests} API requests; ${s.openWatches} watches open; pod state ${JSON.stringify(s.podState)}`, {summary: s}),
    stopped: (s: {requestsSinceReady: number; secondsSinceReady: number}) =>
      write('stopped', `stopped; ${s.requestsSinceReady} API requests in ${Math.round(s.secondsSinceReady)}s since ready`, {summary: s}),
  }
  for (const [name, fn] of Object.entries(handlers)) emulator.on(name as never, fn as never)
  return () => {
    for (const [name, fn] of Object.entries(handlers)) emulator.off(name as never, fn as never)
    lastPodLine.clear()
    lines.flush()
  }
}

/**
 * The lines of one turn of the event loop, written together at its end. On
 * Linux a write to a pipe or a file is synchronous: in the benchmark's start
 * bursts (several lines per pod) one write per line was 2.6% of the node's
 * busy time in a CPU profile, one write per turn 0.5%.
 */
export class LineBatch {
  private pending: string[] = []
  private scheduled: NodeJS.Immediate | undefined

  constructor(private readonly out: NodeJS.WritableStream) {}

  push(line: string): void {
    this.pending.push(line)
    this.scheduled ??= setImmediate(() => this.flush())
  }

  /** Writes what is pending now (also when the renderer detaches). */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled)
    this.scheduled = undefined
    if (this.pending.length === 0) return
    const text = this.pending.join('')
    this.pending = []
    this.out.write(text)
  }
}

/** A pod's line: the READY, STATUS and RESTARTS columns as the dashboard and kubectl compute them. */
function podLine(pod: V1Pod): {namespace: string; name: string; ready: string; status: string; restarts: string; restartCount: number} {
  const restarts = podRestarts(pod)
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    ready: podReady(pod),
    status: podStatus(pod),
    restarts,
    restartCount: Number.parseInt(restarts, 10) || 0,
  }
}
