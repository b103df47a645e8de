import {styleText} from 'node:util'

export type Color = 'red' | 'green' | 'yellow' | 'blue' | 'magenta' | 'cyan' | 'gray' | 'white'

/** Colour when writing to a terminal, unless NO_COLOR; FORCE_COLOR forces it (the usual conventions). */
export function colorEnabled(stream: NodeJS.WritableStream = process.stdout): boolean {
  if (process.env.FORCE_COLOR && process.env.FORCE_COLOR !== '0') return true
  if (process.env.NO_COLOR) return false
  return Boolean((stream as NodeJS.WriteStream).isTTY)
}

export function paint(enabled: boolean, color: Color | 'bold' | 'dim', text: string): string {
  // The decision is colorEnabled's: styleText must not second-guess it from process.stdout.
  return enabled ? styleText(color, text, {validateStream: false}) : text
}

/** stern's idea: one stable colour per container (or pod), from a small palette. */
export const Palette: Color[] = ['cyan', 'green', 'magenta', 'yellow', 'blue', 'red']

export function colorFor(key: string, assigned: Map<string, Color>): Color {
  let c = assigned.get(key)
  if (!c) {
    c = Palette[assigned.size % Palette.length]
    assigned.set(key, c)
  }
  return c
}
