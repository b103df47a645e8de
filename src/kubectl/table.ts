/** Three spaces between columns, as kubectl's tabwriter pads them. */
const Gap = 3

export function columnWidths(header: string[], rows: string[][]): number[] {
  return header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
}

/**
 * One line with the given column widths; a cell wider than its column (a
 * `-w` row after the first table) still gets the full gap. No trailing padding.
 */
export function fixedWidthLine(cells: string[], widths: number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(Math.max(widths[i] ?? 0, c.length) + Gap)))
    .join('')
    .trimEnd()
}

/** Columns as kubectl's tabwriter lays them out: each as wide as its widest cell. */
export function formatTable(header: string[], rows: string[][]): string[] {
  const widths = columnWidths(header, rows)
  return [header, ...rows].map((r) => fixedWidthLine(r, widths))
}
