/**
 * Name rules for values that end up in file paths (namespace, pod and
 * container names): the Kubernetes DNS label and subdomain rules, which admit
 * no '/', no leading '.', and so no traversal.
 */

import {isDnsLabel, isDnsSubdomain} from '../../common/names.js'

export {isDnsSubdomain}

/** Why a name is unacceptable, or undefined when it is fine. */
export function nameProblem(what: 'namespace' | 'pod' | 'container', value: string): string | undefined {
  const ok = what === 'pod' ? isDnsSubdomain(value) : isDnsLabel(value)
  if (ok) return undefined
  const rule = what === 'pod' ? 'a lowercase RFC 1123 subdomain' : 'a lowercase RFC 1123 label'
  return `invalid ${what} name ${JSON.stringify(value)}: must be ${rule} (a-z, 0-9, '-'${what === 'pod' ? ", '.'" : ''})`
}

/**
 * Splits a URL path below a prefix into percent-decoded segments; undefined
 * when a segment is not valid percent-encoding.
 */
export function pathSegments(path: string, prefix: string): string[] | undefined {
  const rest = path.slice(prefix.length)
  try {
    return rest.split('/').map((s) => decodeURIComponent(s))
  } catch {
    return undefined
  }
}
