export interface SerialRunnerOptions {
  /** Passes run only while this holds (checked before each): false once the owner is closed. */
  active?: () => boolean
  /** After the last pass of a run, once nothing is running any more (a run may be asked for again here). */
  idle?: () => void
}

/**
 * Runs one pass at a time: a request while a pass runs is not a second pass
 * beside it but one more pass after it, however many requests came
 * meanwhile (they coalesce). Every request resolves when the passes that
 * cover it are done; a pass that throws ends the run with its error.
 */
export class SerialRunner {
  private current: Promise<void> | undefined
  private again = false

  constructor(
    private readonly pass: () => Promise<void>,
    private readonly opts: SerialRunnerOptions = {},
  ) {}

  /** The run in progress, if any. */
  get running(): Promise<void> | undefined {
    return this.current
  }

  /** Asks for a pass: now if none runs, else once more after the one running. */
  run(): Promise<void> {
    this.again = true
    if (this.current) return this.current
    if (!this.isActive()) return Promise.resolve()
    // Assigned before the first pass starts, so a request from inside it coalesces too.
    let settle!: {resolve: () => void; reject: (e: unknown) => void}
    this.current = new Promise<void>((resolve, reject) => (settle = {resolve, reject}))
    const run = this.current
    this.loop().then(settle.resolve, settle.reject)
    return run
  }

  private async loop(): Promise<void> {
    try {
      while (this.again && this.isActive()) {
        this.again = false
        await this.pass()
      }
    } finally {
      this.current = undefined
      this.again = false
      this.opts.idle?.()
    }
  }

  private isActive(): boolean {
    return this.opts.active?.() ?? true
  }
}
