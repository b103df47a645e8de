import {execa} from 'execa'
import {lstat} from 'node:fs/promises'

/** At most this many pipes per mkfifo command line. */
export const DefaultFifoBatchSize = 256

interface Request {
  paths: string[]
  resolve: () => void
  reject: (error: Error) => void
}

/**
 * Makes named pipes (mode 0600) with the mkfifo program, Node having no
 * mkfifo of its own. Requests that arrive while one mkfifo runs are made
 * by the next one together: a burst of container starts costs a few
 * process spawns (each blocks the event loop for milliseconds), not one
 * per container.
 */
export class FifoMaker {
  private queue: Request[] = []
  private running = false
  /** mkfifo processes run so far. */
  runs = 0

  constructor(private readonly batchSize = DefaultFifoBatchSize) {}

  make(paths: string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({paths, resolve, reject})
      if (!this.running) setImmediate(() => void this.drain())
      this.running = true
    })
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch: Request[] = []
      let n = 0
      while (this.queue.length > 0 && (batch.length === 0 || n + this.queue[0].paths.length <= this.batchSize)) {
        const r = this.queue.shift()!
        batch.push(r)
        n += r.paths.length
      }
      await this.run(batch)
    }
    this.running = false
  }

  private async run(batch: Request[]): Promise<void> {
    // mkfifo makes every pipe it can and reports the others: each request is judged by its own pipes.
    this.runs++
    const result = await execa('mkfifo', ['-m', '600', '--', ...batch.flatMap((r) => r.paths)], {reject: false})
    const failure = result.failed ? (result.stderr || result.shortMessage || 'mkfifo failed').trim() : ''
    await Promise.all(
      batch.map(async (r) => {
        const made = await Promise.all(
          r.paths.map((p) =>
            lstat(p).then(
              (s) => s.isFIFO(),
              () => false,
            ),
          ),
        )
        if (made.every(Boolean)) return r.resolve()
        const lines = failure.split('\n').filter((l) => r.paths.some((p) => l.includes(p)))
        r.reject(new Error(lines.join('; ') || failure || 'mkfifo failed'))
      }),
    )
  }
}

/** One per process: every container start shares it. */
export const fifos = new FifoMaker()
