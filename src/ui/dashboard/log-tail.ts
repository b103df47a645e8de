import type {V1Pod} from '@kubernetes/client-node'
import {closeSync, fstatSync, openSync, readSync} from 'node:fs'
import {containerLogFile, parseCriLine} from '../../emulator/runtime/log-layout.js'

/** Lines the log pane keeps per pod (older ones scroll away). */
export const DefaultLogPaneLines = 500
/** How often the followed files are checked for new bytes. */
export const DefaultLogPollMs = 250
/** At most this much is read from one file per poll, so a chatty container cannot stall the UI. */
export const MaxReadBytes = 256 * 1024

export interface LogLine {
  container: string
  stream: 'stdout' | 'stderr'
  text: string
}

interface FileCursor {
  path: string
  offset: number
  partial: string
}

/**
 * Follows the CRI log files of one pod's containers (the current restart's
 * file of each, per src/emulator/runtime/log-layout.ts), joining partial
 * (P) records, keeping the last maxLines. Reads only what was appended.
 */
export class PodLogTail {
  readonly lines: LogLine[] = []
  private readonly cursors = new Map<string, FileCursor>()

  constructor(
    private readonly stateDir: string,
    private readonly maxLines = DefaultLogPaneLines,
  ) {}

  /** Reads what is new; returns true when lines were added. */
  poll(pod: V1Pod): boolean {
    const ns = pod.metadata?.namespace ?? ''
    const name = pod.metadata?.name ?? ''
    const uid = pod.metadata?.uid ?? ''
    let added = false
    for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
      const status = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].find((s) => s.name === c.name)
      const path = containerLogFile(this.stateDir, ns, name, uid, c.name, status?.restartCount ?? 0)
      let cur = this.cursors.get(c.name)
      // A restart starts a new file: follow it from its beginning.
      if (!cur || cur.path !== path) {
        cur = {path, offset: 0, partial: ''}
        this.cursors.set(c.name, cur)
      }
      added = this.readNew(c.name, cur) || added
    }
    if (this.lines.length > this.maxLines) this.lines.splice(0, this.lines.length - this.maxLines)
    return added
  }

  private readNew(container: string, cur: FileCursor): boolean {
    let fd: number
    try {
      fd = openSync(cur.path, 'r')
    } catch {
      return false
    }
    try {
      const size = fstatSync(fd).size
      if (size < cur.offset) cur.offset = 0 // truncated or rotated: start over
      if (size === cur.offset) return false
      const len = Math.min(size - cur.offset, MaxReadBytes)
      const buf = Buffer.alloc(len)
      const n = readSync(fd, buf, 0, len, cur.offset)
      const text = buf.subarray(0, n).toString('utf8')
      const lastNl = text.lastIndexOf('\n')
      if (lastNl < 0) return false // wait for the whole record
      cur.offset += Buffer.byteLength(text.slice(0, lastNl + 1))
      let added = false
      for (const raw of text.slice(0, lastNl).split('\n')) {
        const rec = parseCriLine(raw)
        if (!rec) continue
        if (rec.tag === 'P') {
          cur.partial += rec.content
          continue
        }
        this.lines.push({container, stream: rec.stream, text: cur.partial + rec.content})
        cur.partial = ''
        added = true
      }
      return added
    } finally {
      closeSync(fd)
    }
  }
}
