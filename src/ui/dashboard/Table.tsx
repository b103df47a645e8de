import {Box, Text} from 'ink'
import type {Tone} from './store.js'

export interface Column {
  title: string
  /** Flexible columns (names) share what is left after the fixed ones; they shrink first. */
  flex?: boolean
  align?: 'left' | 'right'
}

export interface TableRow {
  key: string
  cells: string[]
  tone: Tone
}

export const ToneColor: Record<Tone, string | undefined> = {
  ok: 'green',
  pending: 'yellow',
  completed: 'gray',
  failed: 'red',
  terminating: 'magenta',
}

/** Columns sized to their content, names shrunk (with an ellipsis) so the table fits the width. */
export function layoutColumns(columns: Column[], rows: TableRow[], width: number, gap = 2): number[] {
  const natural = columns.map((c, i) => Math.max(c.title.length, ...rows.map((r) => (r.cells[i] ?? '').length)))
  let excess = natural.reduce((a, b) => a + b, 0) + gap * (columns.length - 1) - width
  const widths = natural.slice()
  const MinFlex = 8
  for (let pass = 0; pass < 2 && excess > 0; pass++) {
    for (let i = columns.length - 1; i >= 0 && excess > 0; i--) {
      if (pass === 0 && !columns[i].flex) continue
      const min = pass === 0 ? MinFlex : Math.min(columns[i].title.length, 3)
      const cut = Math.min(excess, Math.max(0, widths[i] - min))
      widths[i] -= cut
      excess -= cut
    }
  }
  return widths
}

export function fit(text: string, width: number, align: 'left' | 'right' = 'left'): string {
  if (text.length > width) return width <= 1 ? text.slice(0, width) : `${text.slice(0, width - 1)}…`
  return align === 'right' ? text.padStart(width) : text.padEnd(width)
}

/** The window of rows to show so the selected one stays visible. */
export function visibleWindow(total: number, selected: number, height: number): [number, number] {
  if (total <= height) return [0, total]
  const start = Math.max(0, Math.min(selected - Math.floor(height / 2), total - height))
  return [start, start + height]
}

export interface TableProps {
  columns: Column[]
  rows: TableRow[]
  width: number
  /** Lines for rows (the header line is extra). */
  height: number
  selected?: number
  /** Marks the sorted column's title. */
  sortColumn?: number
  descending?: boolean
  empty?: string
}

/** A table as one Text per line: cheap to redraw, no nested layout per cell. */
export function Table({columns, rows, width, height, selected, sortColumn, descending, empty}: TableProps) {
  // The sort mark is part of its title, so it is counted in the width.
  const titles = columns.map((c, i) => (i === sortColumn ? `${c.title}${descending ? '↓' : '↑'}` : c.title))
  // A selectable table marks the selected row with a pointer too, so it shows without colour (NO_COLOR).
  const marker = selected !== undefined ? 2 : 0
  const widths = layoutColumns(
    columns.map((c, i) => ({...c, title: titles[i]})),
    rows,
    width - marker,
  )
  const line = (cells: string[], pointer = false) =>
    (marker ? (pointer ? '› ' : '  ') : '') +
    cells
      .map((c, i) => fit(c, widths[i], columns[i].align))
      .join('  ')
      .trimEnd()
  const [from, to] = visibleWindow(rows.length, selected ?? 0, Math.max(1, height))
  return (
    <Box flexDirection="column">
      <Text bold>{line(titles)}</Text>
      {rows.length === 0 && empty ? <Text dimColor>{empty}</Text> : null}
      {rows.slice(from, to).map((r, i) => {
        const isSelected = from + i === selected
        return (
          <Text key={r.key} color={ToneColor[r.tone]} inverse={isSelected} wrap="truncate">
            {line(r.cells, isSelected)}
          </Text>
        )
      })}
    </Box>
  )
}
