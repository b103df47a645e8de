import {Errors, flush, run} from '@oclif/core'
import {UserError} from './errors.js'

/** The one place a failure is turned into `error: ...` on stderr and an exit code. */
export function reportError(error: unknown): number {
  if (error instanceof Errors.ExitError) return error.oclif.exit ?? 1
  const err = error as Error & {oclif?: {exit?: number}; code?: string}
  if (err?.code === 'EEXIT') return err.oclif?.exit ?? 0
  let message = err instanceof Error ? err.message : String(error)
  // oclif spreads parse errors over several lines and appends a help hint: keep one specific line.
  if (!(err instanceof UserError)) {
    message = message
      .split('\n')
      .filter((l) => !/See more help with/.test(l))
      .map((l) => l.trim())
      .filter(Boolean)
      .join(': ')
      .replace(/^Error:\s*/, '')
      .replace(/:\s*:/g, ':')
  }
  process.stderr.write(`error: ${message}\n`)
  if (process.env.VNODE_DEBUG && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`)
  return 1
}

export async function main(argv: string[]): Promise<void> {
  // React (under ink) loads its development build unless told otherwise: with its checks and
  // profiling marks the dashboard costs several times the CPU and memory. A shell's NODE_ENV is
  // meant for the user's own programs (containers never inherit vnode's environment).
  process.env.NODE_ENV = 'production'
  try {
    await run(argv, import.meta.url)
    await flush()
  } catch (error) {
    process.exitCode = reportError(error)
  }
}
