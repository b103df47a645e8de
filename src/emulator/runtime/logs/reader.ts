import {closeSync, existsSync, openSync, readSync, statSync} from 'node:fs'
import {sleep} from '../../kube/backoff.js'
import {open, stat, type FileHandle} from 'node:fs/promises'
import {parseCriLine, type CriLogLine} from './layout.js'

/**
 * The one reader of the CRI log files, the way the kubelet reads them
 * (pkg/kubelet/kuberuntime/logs): tail on file records first; with follow,
 * new records as they are written until the container ends (a rotated or
 * truncated file is followed into its successor), then the rest of the file
 * is drained. The kubelet API's output (since and stream filters, timestamps,
 * limitBytes) is the server's (server/log-format.ts); the end of a log for
 * FallbackToLogsOnError is readLogTail below, over the same records.
 */

export const DefaultFollowPollMs = 200
const ChunkBytes = 64 * 1024

export interface FollowControl {
  /** True once the container instance has ended (no more writes will come). */
  ended: () => boolean
  signal: AbortSignal
  pollMs?: number
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

async function openIfExists(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, 'r')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

/** Cuts bytes into the raw lines of CRI records; a line not yet ended waits for the rest. */
export class CriLineSplitter {
  private pending = Buffer.alloc(0)

  /** The lines this chunk completes, in order. */
  push(chunk: Buffer): string[] {
    this.pending = Buffer.concat([this.pending, chunk])
    const out: string[] = []
    let nl
    while ((nl = this.pending.indexOf(0x0a)) >= 0) {
      out.push(this.pending.subarray(0, nl).toString())
      this.pending = this.pending.subarray(nl + 1)
    }
    return out
  }

  /** What is left without its newline (the writer stopped mid-line). */
  get rest(): string {
    return this.pending.toString()
  }

  reset(): void {
    this.pending = Buffer.alloc(0)
  }
}

/** A record to its reader; true when the reader wants no more. */
export type RecordSink = (record: CriLogLine) => Promise<boolean | void> | boolean | void

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
    const lines = new CriLineSplitter()
    const buf = Buffer.alloc(ChunkBytes)
    for (;;) {
      // Drain to the end of the file, one record per complete line.
      for (;;) {
        // Without follow, the file as it was at the start: the last tailLines records then, not the ones written since.
        const want = follow ? ChunkBytes : Math.min(ChunkBytes, size - offset)
        if (want <= 0) break
        const {bytesRead} = await fh.read(buf, 0, want, offset)
        if (bytesRead === 0) break
        offset += bytesRead
        for (const line of lines.push(buf.subarray(0, bytesRead))) if (await record(line)) return
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
        lines.reset()
      }
      if (ended) {
        const {bytesRead} = await fh.read(buf, 0, 1, offset)
        if (bytesRead === 0) break
      }
    }
    // A last record without its newline (the writer stopped mid-line).
    if (lines.rest && (!follow || !follow.signal.aborted)) await record(lines.rest)
  } finally {
    await fh.close().catch(() => undefined)
  }
}

/** What FallbackToLogsOnError reads of a log: its last 80 lines (the kubelet's MaxContainerTerminationMessageLogLines). */
export const DefaultLogTailLines = 80
/** ... and at most this many bytes of them (MaxContainerTerminationMessageLogLength). */
export const DefaultLogTailBytes = 2048
/** How far back from the end of the file the tail is looked for. */
const LogTailWindowBytes = 256 * 1024

/**
 * The end of a container's log, as the kubelet reads it for
 * FallbackToLogsOnError: the content of the records, at most the last
 * `lines` lines and `bytes` bytes. Synchronous: it is read while the
 * container's exit is recorded.
 */
export function readLogTail(path: string, lines = DefaultLogTailLines, bytes = DefaultLogTailBytes): string {
  if (!existsSync(path)) return ''
  const size = statSync(path).size
  const readBytes = Math.min(size, LogTailWindowBytes)
  const buf = Buffer.alloc(readBytes)
  const fd = openSync(path, 'r')
  try {
    readSync(fd, buf, 0, readBytes, size - readBytes)
  } finally {
    closeSync(fd)
  }
  const splitter = new CriLineSplitter()
  let text = ''
  for (const raw of [...splitter.push(buf), splitter.rest]) {
    const rec = parseCriLine(raw)
    if (rec) text += rec.content + (rec.tag === 'F' ? '\n' : '')
  }
  const kept = text.split('\n')
  if (kept.at(-1) === '') kept.pop()
  let out = kept.slice(-lines).join('\n') + (text.endsWith('\n') ? '\n' : '')
  const b = Buffer.from(out)
  if (b.length > bytes) out = b.subarray(b.length - bytes).toString('utf8')
  return out
}
