import {mkdirSync, renameSync, rmSync} from 'node:fs'
import {lstat} from 'node:fs/promises'
import {join} from 'node:path'
import {RefillHolds} from '../../../common/refill-holds.js'
import {helpers} from './helper-runner.js'
import {hostProgram} from './host-programs.js'

/** At most this many pipes per mkfifo command line. */
export const DefaultFifoBatchSize = 256
/**
 * Pipes a node keeps made ahead (two per container instance): a start takes
 * its two by rename, and a run of mkfifo tops the reserve up once it is
 * below half, never in a run a start waits for. 256 cover the first 128
 * containers of a burst; in a burst of 100 starts, four mkfifo runs one after
 * the other (80 to 300 ms each on a busy host) sat between the pods' configs
 * and their spawns.
 */
export const DefaultSpareFifos = 256
/** The reserve is topped up once no start has taken pipes for this long: its mkfifo would take the CPU a burst's starts need. */
export const DefaultSpareQuietMs = 1_000
/** Spares made per mkfifo run of a top-up: a start or stop that begins meanwhile waits for one run at most. */
export const DefaultSpareRunSize = 64
/** How long one mkfifo may run. */
export const DefaultMkfifoTimeoutMs = 30_000
/** The reserve's directory in a node's state dir. */
export const SparePipesDir = 'pipes'

interface Request {
  paths: string[]
  resolve: () => void
  reject: (error: Error) => void
}

export interface FifoReserve {
  /** Where the spare pipes wait: a directory of vnode's own, on the filesystem of the pipes asked for (a rename moves them). */
  dir: string
  /** How many are kept made. */
  size?: number
  /** How long after the last start that took pipes the top-up waits (DefaultSpareQuietMs). */
  quietMs?: number
}

/**
 * Makes named pipes (mode 0600) with the mkfifo program, Node having no
 * mkfifo of its own, started by the node's helper (helper-runner.ts), which
 * forks at a few MiB where a spawn of vnode's own holds its event loop for
 * milliseconds. Requests that arrive while one mkfifo runs are made by the
 * next one together: a burst of container starts costs a few program starts,
 * not one per container. With a reserve, a request is served at once from pipes
 * made ahead while enough are there.
 */
export class FifoMaker {
  private queue: Request[] = []
  /** A run for requests is under way, or due. */
  private serving = false
  /** The reserve's top-up under way. */
  private refilling: Promise<void> | undefined
  private closed = false
  /** A spare could not be made (its directory gone, no room): the reserve is given up, requests are made as they come. */
  private reserveFailed = false
  /** Spare pipes made and not yet taken, oldest first. */
  private readonly spares: string[] = []
  private nextSpare = 0
  /** The top-up due once starts are quiet. */
  private quiet: NodeJS.Timeout | undefined
  private readonly unlisten: () => void
  /** mkfifo processes run so far. */
  runs = 0

  constructor(
    private readonly batchSize = DefaultFifoBatchSize,
    private readonly reserve?: FifoReserve,
    /**
     * Pods starting or stopping (process-provider.ts holds them): the reserve is not topped up beside them (its mkfifo
     * would take the CPU the pods' work needs), for at most DefaultRefillHoldMs, as the warm pool's refill.
     */
    private readonly holds = new RefillHolds(() => Date.now()),
  ) {
    this.unlisten = holds.listen({
      ended: () => {
        if (this.holds.size === 0) this.topUpIfLow()
      },
    })
  }

  /** Spare pipes ready to be taken. */
  get reserved(): number {
    return this.spares.length
  }

  /** Empties the reserve's directory (what a vnode that was killed left there is nobody's) and makes the reserve. */
  async prepare(): Promise<void> {
    if (!this.reserve || this.closed) return
    rmSync(this.reserve.dir, {recursive: true, force: true})
    mkdirSync(this.reserve.dir, {recursive: true, mode: 0o700})
    this.topUp()
    await this.idle()
  }

  make(paths: string[]): Promise<void> {
    if (this.take(paths)) {
      this.topUpIfLow()
      return Promise.resolve()
    }
    return new Promise((resolve, reject) => {
      this.queue.push({paths, resolve, reject})
      this.kick()
    })
  }

  private get held(): boolean {
    return this.holds.releaseAt() !== undefined
  }

  /** Stops topping up and removes the spare pipes, once a top-up under way is over; requests already queued are still made. */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.quiet)
    this.quiet = undefined
    this.unlisten()
    this.spares.length = 0
    await this.refilling
    if (this.reserve) rmSync(this.reserve.dir, {recursive: true, force: true})
  }

  /** Resolves once no mkfifo runs and none is due (tests, prepare). */
  async idle(): Promise<void> {
    while (this.serving || this.refilling || this.quiet) {
      if (this.refilling) await this.refilling
      else await new Promise((r) => setTimeout(r, 5))
    }
  }

  /** Moves spare pipes to these paths; false when there are too few, or a rename failed (the reserve is then given up). */
  private take(paths: string[]): boolean {
    if (this.spares.length < paths.length) return false
    const taken = this.spares.splice(0, paths.length)
    try {
      for (let i = 0; i < paths.length; i++) renameSync(taken[i]!, paths[i]!)
      return true
    } catch {
      // A spare removed behind our back, or the paths on another filesystem: the reserve is given up, and mkfifo makes
      // these and every later start's pipes.
      for (const s of [...taken, ...this.spares.splice(0)]) rmSync(s, {force: true})
      this.reserveFailed = true
      return false
    }
  }

  private get shortBy(): number {
    return this.reserve && !this.closed && !this.reserveFailed ? (this.reserve.size ?? DefaultSpareFifos) - this.spares.length : 0
  }

  /** Below half: topped up once starts have been quiet for a while (each start that takes pipes puts it off again). */
  private topUpIfLow(): void {
    clearTimeout(this.quiet)
    this.quiet = undefined
    if (this.shortBy * 2 <= (this.reserve?.size ?? DefaultSpareFifos)) return
    this.quiet = setTimeout(() => {
      this.quiet = undefined
      // Held: looked at again a quiet time later (a release looks at once).
      if (this.held) this.topUpIfLow()
      else this.topUp()
    }, this.reserve?.quietMs ?? DefaultSpareQuietMs)
    this.quiet.unref()
  }

  /** Requests are made one run after another, apart from the reserve's top-ups: a start never waits for spares. */
  private kick(): void {
    if (this.serving || this.queue.length === 0) return
    this.serving = true
    setImmediate(() => void this.serve())
  }

  private async serve(): Promise<void> {
    while (this.queue.length > 0) {
      const batch: Request[] = []
      let n = 0
      while (this.queue.length > 0 && (batch.length === 0 || n + this.queue[0].paths.length <= this.batchSize)) {
        const r = this.queue.shift()!
        batch.push(r)
        n += r.paths.length
      }
      const result = await this.run(batch.flatMap((r) => r.paths))
      await Promise.all(
        batch.map(async (r) => {
          if (await result.made(r.paths)) return r.resolve()
          const lines = result.failure.split('\n').filter((l) => r.paths.some((p) => l.includes(p)))
          r.reject(new Error(lines.join('; ') || result.failure || 'mkfifo failed'))
        }),
      )
    }
    this.serving = false
    // A burst that emptied the reserve: it is made again once starts are quiet.
    this.topUpIfLow()
  }

  /** Makes spares up to the reserve's size, one run at a time, while no request waits for a run of its own. */
  private topUp(): void {
    if (this.refilling || this.shortBy <= 0) return
    this.refilling = (async () => {
      while (this.shortBy > 0 && !this.serving && !this.held) {
        const spares = Array.from({length: Math.min(this.shortBy, this.batchSize, DefaultSpareRunSize)}, () => join(this.reserve!.dir, String(this.nextSpare++)))
        const result = await this.run(spares)
        for (const s of spares) {
          if (!(await result.made([s]))) {
            this.reserveFailed = true
            return
          }
          if (this.closed) rmSync(s, {force: true})
          else this.spares.push(s)
        }
      }
    })().finally(() => (this.refilling = undefined))
  }

  /** One mkfifo: it makes every pipe it can and reports the others; made() tells whether some pipes are there. */
  private async run(paths: string[]): Promise<{failure: string; made: (some: string[]) => Promise<boolean>}> {
    this.runs++
    const result = await helpers.run(hostProgram('mkfifo'), ['-m', '600', '--', ...paths], {env: {}, timeoutMs: DefaultMkfifoTimeoutMs})
    const failed = result.exitCode !== 0
    const failure = failed ? result.stderr.trim() || (result.timedOut ? 'mkfifo timed out' : 'mkfifo failed') : ''
    const isFifo = (p: string) =>
      lstat(p).then(
        (st) => st.isFIFO(),
        () => false,
      )
    // A clean exit means every pipe was made: only a failed run is looked at pipe by pipe.
    return {failure, made: async (some) => !failed || (await Promise.all(some.map(isFifo))).every(Boolean)}
  }
}

/** Without a reserve, for whoever has no node's: every such start shares it. */
export const fifos = new FifoMaker()
