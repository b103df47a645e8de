import type {StreamIO} from '../../provider/streaming.js'
import type {ContainerProcess} from '../process/container-process.js'

/**
 * `kubectl attach`: a client joins a running container's stdio. Output from
 * the moment of attaching is copied to it (the log keeps everything; a
 * client that cannot keep up loses output rather than growing memory);
 * its input goes to the container's stdin when the container was started
 * with `stdin: true`. Several clients may be attached at once.
 */

/** Output queued for a slow client beyond this is dropped for that client. */
export const MaxAttachBacklogBytes = 1 << 20

export interface AttachSpec {
  stdin: boolean
  stdinOnce: boolean
}

/** Resolves when the container exits (its output delivered) or the client leaves. */
export function attachToProcess(proc: ContainerProcess, spec: AttachSpec, io: StreamIO): Promise<void> {
  return new Promise((resolve) => {
    const write = (to: StreamIO['stdout'], chunk: Buffer) => {
      if (to && !to.destroyed && !to.writableEnded && to.writableLength < MaxAttachBacklogBytes) to.write(chunk)
    }
    // A terminal has one output: a tty client asked for no stderr.
    const unsubscribe = proc.onOutput((stream, chunk) => write(stream === 'stderr' && !io.tty ? io.stderr : (io.stdout ?? io.stderr), chunk))
    const input = io.stdin
    const onInput = (chunk: Buffer) => {
      if (spec.stdin) proc.stdin?.write(chunk)
    }
    // With stdinOnce, the first client to close its input closes the container's stdin.
    const onInputEnd = () => {
      if (spec.stdin && spec.stdinOnce) proc.closeStdin()
    }
    input?.on('data', onInput)
    input?.once('end', onInputEnd)
    // A tty container's terminal takes the client's size (kubectl sends it on joining and on every change).
    const onResize = (size: {width: number; height: number}) => proc.resize(size.width, size.height)
    if (io.tty) {
      io.resize?.on('resize', onResize)
      if (io.resize?.last) onResize(io.resize.last)
    }
    let settled = false
    const finish = () => {
      if (settled) return
      settled = true
      unsubscribe()
      input?.off('data', onInput)
      input?.off('end', onInputEnd)
      io.resize?.off('resize', onResize)
      io.signal.removeEventListener('abort', finish)
      resolve()
    }
    io.signal.addEventListener('abort', finish, {once: true})
    if (io.signal.aborted) finish()
    void proc.exited.then(finish)
  })
}
