import {EventEmitter} from 'node:events'
import type {Duplex, Readable, Writable} from 'node:stream'

/**
 * What the kubelet API's exec, attach and port-forward ask of a runtime
 * (virtual-kubelet's RunInContainer / AttachToContainer, the CRI's
 * PortForward). A pod on the host's network needs no runtime to forward a
 * port: the server dials loopback itself.
 */

export interface TerminalSize {
  width: number
  height: number
}

/** Terminal sizes from the client: 'resize' events, and the latest one for whoever starts listening late. */
export class TerminalSizes extends EventEmitter<{resize: [TerminalSize]}> {
  last: TerminalSize | undefined

  push(size: TerminalSize): void {
    this.last = size
    this.emit('resize', size)
  }
}

/** The client's side of a session; absent streams were not requested. */
export interface StreamIO {
  stdin?: Readable
  stdout?: Writable
  stderr?: Writable
  tty: boolean
  /** Terminal size changes from the client, tty only. */
  resize?: TerminalSizes
  /** Aborted when the client's connection is gone. */
  signal: AbortSignal
}

export interface ContainerRef {
  namespace: string
  pod: string
  container: string
}

/** A command that ran and exited with a non-zero status (the kubelet's utilexec.ExitError). */
export class ExitCodeError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message)
  }
}

export interface ContainerStreaming {
  /** Whether the container has a running process (the kubelet refuses exec/attach otherwise, before upgrading). */
  isContainerRunning(ref: ContainerRef): boolean
  /**
   * Runs argv as a new process with the container's environment and working
   * directory; resolves when it exited with 0 and its output is written,
   * throws ExitCodeError for a non-zero exit and Error when it cannot start.
   */
  execInContainer(ref: ContainerRef, command: string[], io: StreamIO): Promise<void>
  /** Joins the container's main process stdio until it exits or the client leaves. */
  attachToContainer(ref: ContainerRef, io: StreamIO): Promise<void>
  /**
   * Port-forward to a pod with a network namespace of its own: a connection
   * to localhost:port inside it, IPv4 then IPv6, as containerd makes it;
   * rejects with DialError. Undefined when the pod shares the host's network.
   */
  dialPodPort?(uid: string, port: number, timeoutMs: number): Promise<Duplex> | undefined
}

/** One failed dial of a port-forward: the address family and the errno code (ECONNREFUSED, ETIMEDOUT, ...). */
export interface DialAttempt {
  family: 4 | 6
  code: string
}

/** Neither localhost:port of the pod's network namespace answered. */
export class DialError extends Error {
  constructor(readonly attempts: DialAttempt[]) {
    super(`failed to connect: ${attempts.map((a) => `IPv${a.family} ${a.code}`).join(', ')}`)
  }
}

export function isContainerStreaming(value: unknown): value is ContainerStreaming {
  const v = value as Partial<ContainerStreaming> | undefined
  return typeof v?.execInContainer === 'function' && typeof v.attachToContainer === 'function' && typeof v.isContainerRunning === 'function'
}
