/**
 * Kubernetes `$(VAR)` expansion, a port of third_party/forked/golang/expansion:
 * `$(NAME)` is replaced when NAME is known and left as written otherwise,
 * `$$` is an escaped `$` (so `$$(NAME)` gives the literal `$(NAME)`), and a
 * `$` before anything else is kept.
 */
export type Mapping = (name: string) => string

/** Looks a name up in each context in turn; unknown names stay `$(NAME)`. */
export function mappingFor(...contexts: Array<ReadonlyMap<string, string> | Record<string, string>>): Mapping {
  return (name) => {
    for (const c of contexts) {
      const v = c instanceof Map ? c.get(name) : (c as Record<string, string>)[name]
      if (v !== undefined && (c instanceof Map || Object.hasOwn(c, name))) return v
    }
    return `$(${name})`
  }
}

export function expand(input: string, mapping: Mapping): string {
  let out = ''
  let checkpoint = 0
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] === '$' && cursor + 1 < input.length) {
      out += input.slice(checkpoint, cursor)
      const {read, isVar, advance} = readVariableName(input.slice(cursor + 1))
      out += isVar ? mapping(read) : read
      cursor += advance
      checkpoint = cursor + 1
    }
  }
  return out + input.slice(checkpoint)
}

function readVariableName(input: string): {read: string; isVar: boolean; advance: number} {
  if (input[0] === '$') return {read: '$', isVar: false, advance: 1}
  if (input[0] === '(') {
    const close = input.indexOf(')', 1)
    if (close >= 0) return {read: input.slice(1, close), isVar: true, advance: close + 1}
    return {read: '$(', isVar: false, advance: 1}
  }
  return {read: `$${input[0]}`, isVar: false, advance: 1}
}
