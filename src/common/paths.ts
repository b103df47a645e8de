import {isAbsolute, relative, sep} from 'node:path'

/** `child` is `parent` or below it. */
export function isWithin(parent: string, child: string): boolean {
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}
