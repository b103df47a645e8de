import {isAbsolute, join, relative, sep} from 'node:path'

/**
 * The globs of --watch-path and --ignore, as .gitignore reads them: `*` and
 * `?` within one path segment, `**` across segments; a pattern without a
 * slash matches any one segment at any depth (`*.pyc`, `node_modules`),
 * one with a slash the whole path from the current directory.
 */

/** What is never worth a restart: VCS data, dependencies, caches and editors' temporary files. */
export const DefaultIgnores = ['.git', '.hg', '.svn', 'node_modules', '__pycache__', '.venv', '.mypy_cache', '.pytest_cache', '*.pyc', '*.swp', '*.swx', '*~', '.#*', '4913', '.DS_Store']

const GlobChars = /[*?[]/

export function hasGlob(pattern: string): boolean {
  return GlobChars.test(pattern)
}

function segmentSource(segment: string): string {
  let out = ''
  for (const ch of segment) {
    if (ch === '*') out += '[^/]*'
    else if (ch === '?') out += '[^/]'
    else out += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&')
  }
  return out
}

/** A glob as a regular expression over a relative path with `/` separators. */
export function globRegExp(pattern: string): RegExp {
  const clean = pattern.replace(/^\.\/+/, '').replace(/\/+$/, '')
  if (!clean.includes('/')) return new RegExp(`(^|/)${segmentSource(clean)}(/|$)`)
  const parts = clean.split('/')
  let source = ''
  parts.forEach((part, i) => {
    const last = i === parts.length - 1
    if (part === '**') source += last ? '.*' : '(?:[^/]+/)*'
    else source += segmentSource(part) + (last ? '' : '/')
  })
  // A directory pattern covers what is below it.
  return new RegExp(`^${source}(/|$)`)
}

/** Does the path (relative to the current directory) match one of the globs? */
export function matchesAny(path: string, globs: RegExp[]): boolean {
  return globs.some((g) => g.test(path))
}

/** A path relative to cwd, with `/` separators (`..` segments when outside it). */
export function relativePath(cwd: string, path: string): string {
  return relative(cwd, path).split(sep).join('/')
}

/** What one --watch-path watches: a directory tree, and a glob its files must match when the path was one. */
export interface WatchRoot {
  dir: string
  only?: RegExp
}

/**
 * A --watch-path as a directory to watch: a directory is itself; a glob
 * watches the directory before its first wildcard and keeps what matches;
 * a file is watched through its directory.
 */
export function watchRoot(cwd: string, path: string, isDirectory: (p: string) => boolean): WatchRoot {
  const full = (p: string) => (isAbsolute(p) ? p : join(cwd, p))
  if (!hasGlob(path)) {
    const abs = full(path)
    if (isDirectory(abs)) return {dir: abs}
    return {dir: join(abs, '..'), only: new RegExp(`^${segmentSource(relativePath(cwd, abs))}$`)}
  }
  const segments = path.split('/')
  const fixed = segments.slice(
    0,
    segments.findIndex((s) => hasGlob(s)),
  )
  const dir = full(fixed.join('/') || '.')
  return {dir, only: globRegExp(relativePath(cwd, full(path)))}
}
