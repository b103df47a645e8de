import {open, stat, type FileHandle} from 'node:fs/promises'
import type {LogOptions} from '../provider/logs.js'
import {parseCriLine, type CriLogLine} from './log-layout.js'

/**
 * The one reader of the CRI log files, the way the kubelet reads them
 * (pkg/kubelet/kuberuntime/logs): tail on file records first; with follow,
 * new records as they are written until the container ends (a rotated or
 * truncated file is followed into its successor), then the rest of the file
 * is drained. readLogFile adds the kubelet API's output on top: the since and
 * stream filters, partial (P) records joined to the next one, timestamps in
 * RFC3339Nano, limitBytes.
 */

export const DefaultFollowPollMs = 200
const ChunkBytes = 64 * 1024

export interface FollowControl {
  /** True once the container instance has ended (no more writes will come). */
  ended: () => boolean
  signal: AbortSignal
  pollMs?: number
}

/** Writes a chunk, resolving once the receiver can take more. */
export type LogWrite = (chunk: string) => Promise<void>

/** Go's RFC3339Nano rendering of a CRI timestamp: trailing zeros of the fraction dropped. */
export function rfc3339Nano(timestamp: string): string {
  const m = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(.*)$/.exec(timestamp)
  if (!m) return timestamp
  const frac = (m[2] ?? '').replace(/0+$/, '')
  return `${m[1]}${frac ? `.${frac}` : ''}${m[3]}`
}

/** The byte offset where the last n records of the file start (the kubelet's tail.FindTailLineStartIndex). */
export async function tailStart(fh: FileHandle, size: number, n: number): Promise<number> {
  if (n <= 0) return size
  let pos = size
  let count = 0
  const buf = Buffer.alloc(ChunkBytes)
  while (pos > 0) {
    const start = Math.max(0, pos - ChunkBytes)
    const len = pos - start
    await fh.read(buf, 0, len, start)
    for (let i = len - 1; i >= 0; i--) {
      // The newline ending the file's last record does not start a record.
      if (buf[i] === 0x0a && start + i !== size - 1 && ++count === n) return start + i + 1
    }
    pos = start
  }
  return 0
}

/** The kubelet API's rendering of records: stream and since filters, timestamps, limitBytes (done once reached). */
export class LogFormatter {
  private written = 0
  done = false

  constructor(
    private readonly opts: LogOptions,
    private readonly write: LogWrite,
  ) {}

  private selected(line: CriLogLine): boolean {
    if (this.opts.stream === 'Stdout' && line.stream !== 'stdout') return false
    if (this.opts.stream === 'Stderr' && line.stream !== 'stderr') return false
    return this.opts.sinceMs === undefined || line.time.getTime() >= this.opts.sinceMs
  }

  async record(line: CriLogLine): Promise<void> {
    if (this.done || !this.selected(line)) return
    let out = `${this.opts.timestamps ? `${rfc3339Nano(line.timestamp)} ` : ''}${line.content}${line.tag === 'F' ? '\n' : ''}`
    if (this.opts.limitBytes !== undefined) {
      const left = this.opts.limitBytes - this.written
      const bytes = Buffer.from(out)
      if (bytes.length >= left) {
        this.done = true
        out = bytes.subarray(0, left).toString()
      }
      this.written += Math.min(bytes.length, left)
    }
    if (out) await this.write(out)
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const t = setTimeout(done, ms)
    function done() {
      clearTimeout(t)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, {once: true})
  })
}

async function openIfExists(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, 'r')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

/** A record to its reader; true when the reader wants no more. */
export type RecordSink = (record: CriLogLine) => Promise<boolean | void> | boolean | void

/** Streams the log file to write; returns when done, the limit is reached, or follow ends or is aborted. */
export async function readLogFile(file: string, opts: LogOptions, write: LogWrite, follow?: FollowControl): Promise<void> {
  const fmt = new LogFormatter(opts, write)
  await readCriRecords(
    file,
    opts.tailLines,
    async (line) => {
      await fmt.record(line)
      return fmt.done
    },
    follow,
  )
}

/**
 * Every parseable record of the file in order, from the last tailLines ones
 * (all without), to sink; with follow, until the container ends or the
 * signal aborts. Records it cannot parse are skipped, as the kubelet does.
 */
export async function readCriRecords(file: string, tailLines: number | undefined, sink: RecordSink, follow?: FollowControl): Promise<void> {
  const pollMs = follow?.pollMs ?? DefaultFollowPollMs
  const record = async (raw: string): Promise<boolean> => {
    const line = parseCriLine(raw)
    return line ? (await sink(line)) === true : false
  }
  let fh = await openIfExists(file)
  // Following a file not yet created: wait for it or for the end of the container.
  while (!fh && follow && !follow.signal.aborted && !follow.ended()) {
    await sleep(pollMs, follow.signal)
    fh = await openIfExists(file)
  }
  if (!fh) return
  try {
    let {size, ino} = await fh.stat()
    let offset = tailLines !== undefined ? await tailStart(fh, size, tailLines) : 0
    let pending = Buffer.alloc(0)
    const buf = Buffer.alloc(ChunkBytes)
    for (;;) {
      // Drain to the end of the file, one record per complete line.
      for (;;) {
        const {bytesRead} = await fh.read(buf, 0, ChunkBytes, offset)
        if (bytesRead === 0) break
        offset += bytesRead
        pending = Buffer.concat([pending, buf.subarray(0, bytesRead)])
        let nl
        while ((nl = pending.indexOf(0x0a)) >= 0) {
          const stop = await record(pending.subarray(0, nl).toString())
          pending = pending.subarray(nl + 1)
          if (stop) return
        }
      }
      if (!follow || follow.signal.aborted) break
      // Decide on the end before waiting, then drain once more: no record written before the end is lost.
      const ended = follow.ended()
      if (!ended) await sleep(pollMs, follow.signal)
      const now = await stat(file).catch(() => undefined)
      if (now && (now.ino !== ino || now.size < offset)) {
        // Rotated (renamed away and recreated) or truncated: continue with the new file from its start.
        await fh.close()
        fh = await open(file, 'r')
        ;({size, ino} = await fh.stat())
        offset = 0
        pending = Buffer.alloc(0)
      }
      if (ended) {
        const {bytesRead} = await fh.read(buf, 0, 1, offset)
        if (bytesRead === 0) break
      }
    }
    // A last record without its newline (the writer stopped mid-line).
    if (pending.length > 0 && (!follow || !follow.signal.aborted)) await record(pending.toString())
  } finally {
    await fh.close().catch(() => undefined)
  }
}
