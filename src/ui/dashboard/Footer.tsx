import {Text} from 'ink'
import {footerKeys, type Mode} from './keys.js'

export type {Mode}

export function Footer({mode, note}: {mode: Mode; note?: string}) {
  return (
    <Text wrap="truncate">
      {note ? <Text color="cyan">{note} </Text> : null}
      {footerKeys(mode).map(([k, what]) => (
        <Text key={k}>
          <Text bold>{k}</Text>
          <Text dimColor> {what} </Text>
        </Text>
      ))}
    </Text>
  )
}
