import type {Key} from 'ink'

/**
 * The dashboard's keys in one table, as k9s keeps its key actions: what a
 * key does (input handling), how the help screen lists it, and what the
 * footer shows in each mode all come from KeyCommands.
 */

export type Mode = 'table' | 'details' | 'logs' | 'help' | 'confirm' | 'quitting'

export type KeyAction = 'up' | 'down' | 'pageUp' | 'pageDown' | 'details' | 'logs' | 'kill' | 'forceKill' | 'sort' | 'reverseSort' | 'back' | 'quit' | 'help'

export interface KeyCommand {
  /** The keys as the help screen names them, and as the footer does. */
  keys: string
  footerKeys: string
  description: string
  footerLabel: string
  /** The modes whose footer shows it. */
  footerIn: Mode[]
  /** What each key does, tried in order. */
  actions: [KeyAction, (input: string, key: Key) => boolean][]
}

const is = (ch: string) => (input: string) => input === ch

/** In the help screen's order; a footer shows `back` first and `quit` last. */
export const KeyCommands: KeyCommand[] = [
  {
    keys: '↑ ↓  j k',
    footerKeys: '↑↓/jk',
    description: 'move the selection',
    footerLabel: 'select',
    footerIn: ['table'],
    actions: [
      ['up', (i, k) => k.upArrow || i === 'k'],
      ['down', (i, k) => k.downArrow || i === 'j'],
      ['pageUp', (_, k) => k.pageUp],
      ['pageDown', (_, k) => k.pageDown],
    ],
  },
  {
    keys: 'enter',
    footerKeys: 'enter',
    description: 'details of the selected pod: containers, last state, exit codes, probes, events',
    footerLabel: 'details',
    footerIn: ['table', 'logs'],
    actions: [['details', (_, k) => k.return]],
  },
  {keys: 'l', footerKeys: 'l', description: "follow the selected pod's logs (all its containers)", footerLabel: 'logs', footerIn: ['table', 'details'], actions: [['logs', is('l')]]},
  {
    keys: 'x',
    footerKeys: 'x',
    description: 'kill the selected pod gracefully (deletes it through the API, after confirmation)',
    footerLabel: 'kill',
    footerIn: ['table', 'details'],
    actions: [['kill', is('x')]],
  },
  {keys: 'X', footerKeys: 'X', description: 'force kill (grace period 0), after confirmation', footerLabel: 'force kill', footerIn: ['table'], actions: [['forceKill', is('X')]]},
  {
    keys: 's',
    footerKeys: 's/S',
    description: 'sort by the next column; S reverses the order',
    footerLabel: 'sort',
    footerIn: ['table'],
    actions: [
      ['sort', is('s')],
      ['reverseSort', is('S')],
    ],
  },
  {keys: 'esc', footerKeys: 'esc', description: 'back to the pod table', footerLabel: 'back', footerIn: ['details', 'logs'], actions: [['back', (_, k) => k.escape || k.backspace]]},
  {
    keys: 'q  ctrl-c',
    footerKeys: 'q',
    description: 'stop the node gracefully, showing progress; ctrl-c again exits at once',
    footerLabel: 'quit',
    footerIn: ['table', 'details', 'logs'],
    actions: [['quit', is('q')]],
  },
  {keys: '?', footerKeys: '?', description: 'this help', footerLabel: 'help', footerIn: ['table'], actions: [['help', is('?')]]},
]

/** The keys of the modes that ask one thing (help open, a kill to confirm, shutting down), handled by the dashboard itself. */
const PromptFooters: Partial<Record<Mode, [string, string][]>> = {
  help: [['esc/?', 'close']],
  confirm: [
    ['y', 'yes'],
    ['any other key', 'cancel'],
  ],
  quitting: [['ctrl-c', 'exit now, without finishing the shutdown']],
}

/** The action a key has in the table, details and logs modes. */
export function keyAction(input: string, key: Key): KeyAction | undefined {
  for (const c of KeyCommands) for (const [action, matches] of c.actions) if (matches(input, key)) return action
  return undefined
}

/** The help screen's lines: keys and what they do. */
export function helpLines(): [string, string][] {
  return KeyCommands.map((c) => [c.keys, c.description])
}

/** The footer's keys and labels in a mode. */
export function footerKeys(mode: Mode): [string, string][] {
  const prompt = PromptFooters[mode]
  if (prompt) return prompt
  const shown = KeyCommands.filter((c) => c.footerIn.includes(mode))
  const rank = (c: KeyCommand) => (c.footerLabel === 'back' ? -1 : c.footerLabel === 'quit' ? 1 : 0)
  return shown.sort((a, b) => rank(a) - rank(b)).map((c) => [c.footerKeys, c.footerLabel])
}
