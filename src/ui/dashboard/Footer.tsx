import {Text} from 'ink'

export type Mode = 'table' | 'details' | 'logs' | 'help' | 'confirm' | 'quitting'

const Keys: Record<Mode, [string, string][]> = {
  table: [
    ['↑↓/jk', 'select'],
    ['enter', 'details'],
    ['l', 'logs'],
    ['x', 'kill'],
    ['X', 'force kill'],
    ['s/S', 'sort'],
    ['?', 'help'],
    ['q', 'quit'],
  ],
  details: [
    ['esc', 'back'],
    ['l', 'logs'],
    ['x', 'kill'],
    ['q', 'quit'],
  ],
  logs: [
    ['esc', 'back'],
    ['enter', 'details'],
    ['q', 'quit'],
  ],
  help: [['esc/?', 'close']],
  confirm: [
    ['y', 'yes'],
    ['any other key', 'cancel'],
  ],
  quitting: [['ctrl-c', 'exit now, without finishing the shutdown']],
}

export function Footer({mode, note}: {mode: Mode; note?: string}) {
  return (
    <Text wrap="truncate">
      {note ? <Text color="cyan">{note} </Text> : null}
      {Keys[mode].map(([k, what]) => (
        <Text key={k}>
          <Text bold>{k}</Text>
          <Text dimColor> {what}  </Text>
        </Text>
      ))}
    </Text>
  )
}
