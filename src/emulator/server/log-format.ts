import type {CriLogLine, LogOptions} from '../provider/logs.js'

/** Writes a chunk, resolving once the receiver can take more. */
export type LogWrite = (chunk: string) => Promise<void>

/** Go's RFC3339Nano rendering of a CRI timestamp: trailing zeros of the fraction dropped. */
export function rfc3339Nano(timestamp: string): string {
  const m = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(.*)$/.exec(timestamp)
  if (!m) return timestamp
  const frac = (m[2] ?? '').replace(/0+$/, '')
  return `${m[1]}${frac ? `.${frac}` : ''}${m[3]}`
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
