/** The environment `env -0` printed: NUL-separated NAME=value entries (a value may hold '=' and newlines). */
export function parseEnvZero(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\0')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  )
}
