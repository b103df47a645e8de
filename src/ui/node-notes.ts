/**
 * The node's own lines of `up` (its mode, the namespaces it serves, cluster
 * DNS trouble): on stderr, except while the dashboard owns the terminal, when
 * a line written below the frame would push the frame's first line off the
 * screen until the next redraw. Then they go to the dashboard instead.
 */
export class NodeNotes {
  private sink: ((line: string) => void) | undefined

  constructor(private readonly err: NodeJS.WritableStream = process.stderr) {}

  write(line: string): void {
    if (this.sink) this.sink(line)
    else this.err.write(`${line}\n`)
  }

  /** Sends lines to `sink` until the returned function is called; then stderr again. */
  divert(sink: (line: string) => void): () => void {
    this.sink = sink
    return () => {
      if (this.sink === sink) this.sink = undefined
    }
  }
}
