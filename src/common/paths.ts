import {isAbsolute, relative, sep} from 'node:path'

/** A `.` or `..` segment, or an empty one: a path relative() would have to normalise first. */
const NotNormal = /\/\/|(^|\/)\.\.?(\/|$)/

/** An absolute path with no `.`, `..` or empty segment and no trailing slash (what mountinfo, listings and specs give). */
function normalAbsolute(p: string): boolean {
  return p.startsWith('/') && (p.length === 1 || !p.endsWith('/')) && !NotNormal.test(p)
}

/**
 * `child` is `parent` or below it. Normalised absolute paths (the usual
 * case: the sandbox compares dozens per container start) are compared as
 * strings; anything else goes through path.relative, which resolves both
 * against the working directory.
 */
export function isWithin(parent: string, child: string): boolean {
  if (normalAbsolute(parent) && normalAbsolute(child)) return child === parent || parent === '/' || child.startsWith(`${parent}/`)
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}
