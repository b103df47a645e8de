/** Elapsed times as the cli and the ui print them. */

/** Milliseconds as a short human duration: 850ms, 2.4s, 1m05s. */
export function formatElapsed(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`
  const m = Math.floor(ms / 60_000)
  return `${m}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s`
}
