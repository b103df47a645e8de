import {closeSync, existsSync, fstat, fstatSync, mkdirSync, open, openSync, renameSync, rmSync, writeSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {promisify} from 'node:util'
import {dirname} from 'node:path'
import type {Readable} from 'node:stream'
import {StringDecoder} from 'node:string_decoder'
import {criTimestamp, type LogStream} from './layout.js'

/** The kubelet's containerLogMaxSize and containerLogMaxFiles defaults. */
export const DefaultLogMaxBytes = 10 * 1024 * 1024
export const DefaultLogMaxFiles = 5
/** containerd splits longer lines into partial (P) records of this size. */
export const MaxCriRecordChars = 16 * 1024

export interface LogRotation {
  maxBytes: number
  /** Files kept, the current one included (the kubelet's containerLogMaxFiles). */
  maxFiles: number
}

const openFd = promisify(open)
const fstatFd = promisify(fstat)

/**
 * Writes one container instance's stdout and stderr to its CRI log file
 * (log-layout.ts), one record per line, rotating by size. Writes are
 * synchronous so records of both streams keep their order.
 */
export class ContainerLogWriter {
  private fd: number
  private size: number
  private lastMs = 0
  private seq = 0

  constructor(
    readonly path: string,
    private readonly rotation: LogRotation = {maxBytes: DefaultLogMaxBytes, maxFiles: DefaultLogMaxFiles},
    opened?: {fd: number; size: number},
  ) {
    if (opened) {
      this.fd = opened.fd
      this.size = opened.size
      return
    }
    mkdirSync(dirname(path), {recursive: true, mode: 0o700})
    this.fd = openSync(path, 'a', 0o600)
    this.size = fstatSync(this.fd).size
  }

  /** The writer of a new instance's log, its directory and file made on libuv's threads (a start's path, not the event loop's). */
  static async open(path: string, rotation?: LogRotation): Promise<ContainerLogWriter> {
    await mkdir(dirname(path), {recursive: true, mode: 0o700})
    const fd = await openFd(path, 'a', 0o600)
    try {
      return new ContainerLogWriter(path, rotation, {fd, size: (await fstatFd(fd)).size})
    } catch (error) {
      closeSync(fd)
      throw error
    }
  }

  /** Copies a stream into the log until it ends; resolves then. */
  attach(stream: Readable, name: LogStream): Promise<void> {
    const decoder = new StringDecoder('utf8')
    let pending = ''
    return new Promise((resolve) => {
      stream.on('data', (chunk: Buffer) => {
        pending += decoder.write(chunk)
        pending = this.writeLines(name, pending)
      })
      let ended = false
      const end = () => {
        if (ended) return
        ended = true
        pending += decoder.end()
        if (pending) this.record(name, 'F', pending)
        pending = ''
        resolve()
      }
      stream.once('end', end)
      stream.once('error', end)
      // Destroyed (drain timeout): no 'end' comes.
      stream.once('close', end)
    })
  }

  /** Writes every complete line of text; returns what is left of an unterminated one. */
  private writeLines(name: LogStream, text: string): string {
    let start = 0
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      this.line(name, text.slice(start, nl))
      start = nl + 1
    }
    let rest = text.slice(start)
    while (rest.length > MaxCriRecordChars) {
      this.record(name, 'P', rest.slice(0, MaxCriRecordChars))
      rest = rest.slice(MaxCriRecordChars)
    }
    return rest
  }

  private line(name: LogStream, line: string): void {
    while (line.length > MaxCriRecordChars) {
      this.record(name, 'P', line.slice(0, MaxCriRecordChars))
      line = line.slice(MaxCriRecordChars)
    }
    this.record(name, 'F', line)
  }

  private record(name: LogStream, tag: 'F' | 'P', content: string): void {
    if (this.fd < 0) return
    const buf = Buffer.from(`${this.timestamp()} ${name} ${tag} ${content}\n`)
    writeSync(this.fd, buf)
    this.size += buf.length
    if (this.size >= this.rotation.maxBytes) this.rotate()
  }

  /** Strictly increasing timestamps, so readers can order records written within one millisecond. */
  private timestamp(): string {
    const now = Date.now()
    if (now !== this.lastMs) {
      this.lastMs = now
      this.seq = 0
    } else {
      this.seq = Math.min(this.seq + 1, 999_999)
    }
    return criTimestamp(new Date(now), this.seq)
  }

  private rotate(): void {
    closeSync(this.fd)
    rotateFiles(this.path, this.rotation.maxFiles)
    this.fd = openSync(this.path, 'a', 0o600)
    this.size = 0
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd)
    this.fd = -1
  }
}

/** path -> path.1 -> ... -> path.(maxFiles-1); the oldest beyond that is removed. */
export function rotateFiles(path: string, maxFiles: number): void {
  const keep = Math.max(1, maxFiles) - 1
  if (keep === 0) return rmSync(path, {force: true})
  rmSync(`${path}.${keep}`, {force: true})
  for (let i = keep - 1; i >= 1; i--) if (existsSync(`${path}.${i}`)) renameSync(`${path}.${i}`, `${path}.${i + 1}`)
  renameSync(path, `${path}.1`)
}
