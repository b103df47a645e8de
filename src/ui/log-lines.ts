import {type Color, colorFor, paint} from './color.js'

/**
 * Log lines as `kubectl vnode logs` prints them: as they come for one
 * container; with several, each line prefixed by its container's name in
 * that container's own colour (stern's convention).
 */
export class LogLinePrinter {
  private readonly colors = new Map<string, Color>()
  private width = 0

  constructor(
    private readonly color: boolean,
    containers: string[],
  ) {
    for (const c of containers) colorFor(c, this.colors)
    this.width = Math.max(0, ...containers.map((c) => c.length))
  }

  format(container: string, line: string, multi: boolean): string {
    if (!multi) return line
    const name = container.padEnd(this.width)
    return `${paint(this.color, colorFor(container, this.colors), name)} ${paint(this.color, 'dim', '│')} ${line}`
  }
}
