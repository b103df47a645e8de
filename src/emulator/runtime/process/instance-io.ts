import {constants as fsConstants, openSync, rmSync} from 'node:fs'
import {rm} from 'node:fs/promises'
import {Socket} from 'node:net'
import {Readable} from 'node:stream'
import {join} from 'node:path'
import {DefaultFifoBatchSize, FifoMaker, fifos as sharedFifos, SparePipesDir} from './fifo.js'
import {RealClock, type Clock} from '../../../common/clock.js'
import type {RefillHolds} from '../../../common/refill-holds.js'
import {ContainerLogWriter, type LogRotation} from '../logs/writer.js'

/**
 * Where an instance's stdout and stderr go: two named pipes, `<base>.stdout`
 * and `<base>.stderr`. The container holds each open read-write, so its
 * writes never fail with EPIPE when vnode dies; vnode reads them into the
 * CRI log, and a restarted vnode reopens them (adopt.ts) and goes on.
 */
export interface OutputPipes {
  stdout: string
  stderr: string
}

/** A node's maker of output pipes, with its reserve in `<stateDir>/pipes` (fifo.ts), topped up when no pod start or stop holds it. */
export function nodeFifoMaker(stateDir: string, holds: RefillHolds): FifoMaker {
  return new FifoMaker(DefaultFifoBatchSize, {dir: join(stateDir, SparePipesDir)}, holds)
}

export type {FifoMaker}

export function outputPipes(base: string): OutputPipes {
  return {stdout: `${base}.stdout`, stderr: `${base}.stderr`}
}

/** What an instance's output needs: where its pipes are, its CRI log and rotation. */
export interface InstanceIOSpec {
  logPath: string
  /** Path prefix of the instance's output pipes (outputPipes). */
  pipes: string
  rotation?: LogRotation
  clock?: Clock
  /** The node's pipe maker (its reserve); a shared one without a reserve by default. */
  fifos?: FifoMaker
}

/**
 * An instance's output before it starts: its pipes (the child's ends are
 * read-write, so while it lives the pipes always have a reader), vnode's
 * readers and the CRI log. `abandon` undoes it for a start that failed.
 */
export async function openInstanceIO(spec: InstanceIOSpec) {
  const pipes = outputPipes(spec.pipes)
  // The pipes and the log at once: each is a few file operations on libuv's threads, and neither needs the other.
  const [made, opened] = await Promise.allSettled([makePipes(pipes, spec.fifos ?? sharedFifos), ContainerLogWriter.open(spec.logPath, spec.rotation)])
  if (made.status === 'rejected' || opened.status === 'rejected') {
    if (opened.status === 'fulfilled') opened.value.close()
    if (made.status === 'fulfilled') removePipes(pipes)
    throw made.status === 'rejected' ? made.reason : (opened as PromiseRejectedResult).reason
  }
  const log = opened.value
  const readers = {stdout: openReader(pipes.stdout), stderr: openReader(pipes.stderr)}
  const out: number = openSync(pipes.stdout, fsConstants.O_RDWR)
  const err: number = openSync(pipes.stderr, fsConstants.O_RDWR)
  const abandon = () => {
    log.close()
    readers.stdout.destroy()
    readers.stderr.destroy()
    removePipes(pipes)
  }
  return {pipes, readers, out, err, log, startedAt: new Date((spec.clock ?? RealClock).now()), abandon}
}

async function makePipes(pipes: OutputPipes, fifos: FifoMaker): Promise<void> {
  await Promise.all([rm(pipes.stdout, {force: true}), rm(pipes.stderr, {force: true})])
  try {
    await fifos.make([pipes.stdout, pipes.stderr])
  } catch (error) {
    throw new Error(`cannot create the container's output pipes: ${(error as Error).message}`, {cause: error})
  }
}

/** A non-blocking reader of a named pipe: a pipe handle on the event loop, not a thread-pool read. */
function openReader(path: string): Socket {
  const fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  return new Socket({fd, readable: true, writable: false})
}

/** The pipe's reader, or an ended stream when the pipe is gone (its output is lost, the process is not). */
export function openReaderOrEmpty(path: string): Readable {
  try {
    return openReader(path)
  } catch {
    return Readable.from([])
  }
}

export function removePipes(pipes: OutputPipes): void {
  rmSync(pipes.stdout, {force: true})
  rmSync(pipes.stderr, {force: true})
}
