import {open, stat, type FileHandle} from 'node:fs/promises'
import {parseCriLine, type CriLogLine} from '../runtime/log-layout.js'
import type {LogOptions} from './log-options.js'

/**
 * Reads one container instance's CRI log file the way the kubelet does
 * (pkg/kubelet/kuberuntime/logs): tail on file records first, then the
 * since and stream filters; partial (P) records are joined to the next one;
 * timestamps are the record's, in RFC3339Nano; limitBytes cuts the output.
 * With follow, new records are sent as they are written until the container
 * ends, then the rest of the file is drained.
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

class Formatter {
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

  async record(raw: string): Promise<void> {
    if (this.done) return
    const line = parseCriLine(raw)
    // The kubelet logs and skips records it cannot parse.
    if (!line || !this.selected(line)) return
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

/** Streams the log file to write; returns when done, the limit is reached, or follow ends or is aborted. */
export async function readLogFile(file: string, opts: LogOptions, write: LogWrite, follow?: FollowControl): Promise<void> {
  const fmt = new Formatter(opts, write)
  const pollMs = follow?.pollMs ?? DefaultFollowPollMs
  let fh = await openIfExists(file)
  // Following a file not yet created: wait for it or for the end of the container.
  while (!fh && follow && !follow.signal.aborted && !follow.ended()) {
    await sleep(pollMs, follow.signal)
    fh = await openIfExists(file)
  }
  if (!fh) return
  try {
    let {size, ino} = await fh.stat()
    let offset = opts.tailLines !== undefined ? await tailStart(fh, size, opts.tailLines) : 0
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
          await fmt.record(pending.subarray(0, nl).toString())
          pending = pending.subarray(nl + 1)
          if (fmt.done) return
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
    if (pending.length > 0 && (!follow || !follow.signal.aborted)) await fmt.record(pending.toString())
  } finally {
    await fh.close().catch(() => undefined)
  }
}
