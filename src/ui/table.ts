/**
 * Columns as kubectl's tabwriter lays them out: each column as wide as its
 * widest cell, three spaces between columns, no trailing padding.
 */
export function formatTable(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] + 3)))
      .join('')
      .trimEnd()
  return [line(header), ...rows.map(line)]
}

/** Formats rows with widths fixed by a first batch, for `-w` output that appends rows (kubectl does the same). */
export function fixedWidthLine(cells: string[], widths: number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd((widths[i] ?? c.length) + 3)))
    .join('')
    .trimEnd()
}

export function columnWidths(header: string[], rows: string[][]): number[] {
  return header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
}
