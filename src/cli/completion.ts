/**
 * Shell completion for `kubectl vnode`, through kubectl's own: kubectl
 * (1.26+) completes a plugin by running `kubectl_complete-<plugin>` from
 * PATH with the words after the plugin name, the last one the word being
 * completed, and reads one candidate per line (`value\tdescription`) and a
 * last line `:<directive>`, cobra's ShellCompDirective.
 */

/** Cobra's ShellCompDirective bits, as kubectl passes them to the shell. */
export const CompDirective = {Default: 0, NoSpace: 2, NoFileComp: 4} as const

export interface CompletionFlag {
  type: 'boolean' | 'option'
  char?: string
  options?: readonly string[]
  allowNo?: boolean
  summary?: string
  description?: string
  hidden?: boolean
}

/** What completion needs of a command (oclif's metadata: `cluster:up` is "cluster up"). */
export interface CompletionCommand {
  /** Words: ['cluster', 'up']. */
  path: string[]
  summary?: string
  flags: Record<string, CompletionFlag>
  /** Its arguments are pod names. */
  takesPods: boolean
}

export interface Completion {
  candidates: string[]
  directive: number
}

/** Values that only the cluster or the kubeconfig know, asked for only when they are completed. */
export interface CompletionSources {
  pods(flags: Record<string, string>): Promise<string[]>
  contexts(flags: Record<string, string>): Promise<string[]>
  namespaces(flags: Record<string, string>): Promise<string[]>
}

/** Flags whose value is a file or directory: the shell completes paths for them. */
const PathFlag = /(^|-)(kubeconfig|dir|file|manifests|images)$/

interface Parsed {
  command?: CompletionCommand
  /** Positional words so far (the command's path and its arguments). */
  words: string[]
  /** Option flags given so far, by name (the last value wins). */
  values: Record<string, string>
  /** The option flag whose value the word being completed is. */
  pendingFlag?: string
}

/** The output kubectl reads: candidates, then `:<directive>`. */
export function formatCompletion(c: Completion): string {
  return [...c.candidates, `:${c.directive}`].join('\n') + '\n'
}

/** `args`: the words after `kubectl vnode`, the last one being completed; `topics`: a topic's words joined by a space, to its summary. */
export async function complete(commands: CompletionCommand[], args: string[], sources: CompletionSources, topics: Map<string, string> = new Map()): Promise<Completion> {
  const done = args.slice(0, -1)
  const word = args.at(-1) ?? ''
  const parsed = parse(commands, done)
  const {command} = parsed
  if (parsed.pendingFlag && command) return flagValues(command, parsed.pendingFlag, '', word, parsed.values, sources)
  if (word.startsWith('--') && word.includes('=') && command) {
    const name = word.slice(2, word.indexOf('='))
    return flagValues(command, name, `--${name}=`, word.slice(word.indexOf('=') + 1), parsed.values, sources)
  }
  if (word.startsWith('-')) return {candidates: command ? flagNames(command, word) : [], directive: CompDirective.NoFileComp}
  // Still choosing the command, or one of a topic's.
  if (!command || parsed.words.length < command.path.length) return {candidates: subcommands(commands, topics, parsed.words, word), directive: CompDirective.NoFileComp}
  if (command.takesPods) return {candidates: prefixed(await safely(() => sources.pods(parsed.values)), word), directive: CompDirective.NoFileComp}
  return {candidates: [], directive: CompDirective.NoFileComp}
}

function parse(commands: CompletionCommand[], done: string[]): Parsed {
  const p: Parsed = {words: [], values: {}}
  for (let i = 0; i < done.length; i++) {
    const w = done[i]
    if (!w.startsWith('-') || w === '-') {
      p.words.push(w)
      p.command = longestCommand(commands, p.words) ?? p.command
      continue
    }
    const name = flagName(p.command, w)
    const flag = name ? p.command?.flags[name] : undefined
    if (flag?.type !== 'option') continue
    if (w.includes('=')) p.values[name!] = w.slice(w.indexOf('=') + 1)
    else if (i + 1 < done.length) p.values[name!] = done[++i]
    else p.pendingFlag = name
  }
  return p
}

/** The command whose path is the longest prefix of the positional words. */
function longestCommand(commands: CompletionCommand[], words: string[]): CompletionCommand | undefined {
  let best: CompletionCommand | undefined
  for (const c of commands) {
    if (c.path.length <= words.length && c.path.every((w, i) => words[i] === w) && c.path.length > (best?.path.length ?? 0)) best = c
  }
  return best
}

/** `--name`, `--name=v`, `-n`: the flag's long name, if the command has it. */
function flagName(command: CompletionCommand | undefined, word: string): string | undefined {
  if (!command) return undefined
  if (word.startsWith('--')) {
    const name = word.slice(2).split('=')[0]
    return command.flags[name] ? name : undefined
  }
  const char = word.slice(1, 2)
  return Object.entries(command.flags).find(([, f]) => f.char === char)?.[0]
}

function describe(value: string, text?: string): string {
  const line = text?.split('\n')[0].trim()
  return line ? `${value}\t${line}` : value
}

function flagNames(command: CompletionCommand, word: string): string[] {
  const out: string[] = []
  for (const [name, f] of Object.entries(command.flags).sort(([a], [b]) => a.localeCompare(b))) {
    if (f.hidden) continue
    out.push(describe(`--${name}`, f.summary ?? f.description))
    if (f.allowNo) out.push(describe(`--no-${name}`, f.summary ?? f.description))
  }
  return out.filter((c) => c.startsWith(word))
}

function subcommands(commands: CompletionCommand[], topics: Map<string, string>, words: string[], word: string): string[] {
  const next = new Map<string, string | undefined>()
  for (const c of commands) {
    if (c.path.length <= words.length || !words.every((w, i) => c.path[i] === w)) continue
    const name = c.path[words.length]
    // A topic (cluster) has a summary of its own, not its commands'.
    next.set(name, c.path.length === words.length + 1 ? c.summary : topics.get([...words, name].join(' ')))
  }
  return [...next].filter(([name]) => name.startsWith(word)).map(([name, summary]) => describe(name, summary))
}

async function flagValues(command: CompletionCommand, name: string, prefix: string, word: string, values: Record<string, string>, sources: CompletionSources): Promise<Completion> {
  const flag = command.flags[name]
  if (!flag) return {candidates: [], directive: CompDirective.NoFileComp}
  let options: string[] | undefined = flag.options ? [...flag.options] : undefined
  if (name === 'context') options = await safely(() => sources.contexts(values))
  if (name === 'namespace') options = await safely(() => sources.namespaces(values))
  if (options) return {candidates: prefixed(options, word).map((o) => prefix + o), directive: CompDirective.NoFileComp}
  // A path: the shell's own file completion (only for the separate-word form, which the shell can complete).
  return {candidates: [], directive: PathFlag.test(name) && !prefix ? CompDirective.Default : CompDirective.NoFileComp}
}

const prefixed = (values: string[], word: string) => values.filter((v) => v.startsWith(word))

/** A source that fails (no cluster, no kubeconfig) completes nothing rather than print an error into the shell. */
async function safely(fn: () => Promise<string[]>): Promise<string[]> {
  try {
    return await fn()
  } catch {
    return []
  }
}
