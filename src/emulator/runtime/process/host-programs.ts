import {accessSync, constants} from 'node:fs'
import {delimiter, join} from 'node:path'

const found = new Map<string, string>()

/**
 * The runtime's own helper programs (bwrap, nsenter, setsid) by absolute
 * path, found on vnode's PATH: never on the container's, which the pod may
 * set to anything. The name itself when it is not found (the spawn then
 * fails with its usual error).
 */
export function hostProgram(name: string): string {
  const known = found.get(name)
  if (known) return known
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(delimiter)) {
    if (!dir) continue
    const path = join(dir, name)
    try {
      accessSync(path, constants.X_OK)
      found.set(name, path)
      return path
    } catch {
      /* next */
    }
  }
  return name
}

/** perl (Debian's perl-base, an Essential package): the runtime's fixed scripts (placed-argv.ts, sandbox/entry.ts). */
export const PerlProgram = 'perl'

/** A fixed perl script and its arguments: `perl -e source args...`, or run by a perl already running (the helper). */
export interface PerlScript {
  source: string
  args: string[]
}

/** The argv that runs a script in a perl of its own. */
export function perlScriptArgv(script: PerlScript): string[] {
  return [hostProgram(PerlProgram), '-e', script.source, ...script.args]
}

/** Variables perl itself reads at start (PERL5OPT, PERLIO, ...). */
const ReadByPerl = /^PERL/

/** Whether an environment sets a variable perl reads at start: perl never runs as root with one (its script is left out). */
export function speaksToPerl(env: Record<string, string>): boolean {
  return Object.keys(env).some((k) => ReadByPerl.test(k))
}
