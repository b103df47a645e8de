import {Box, Text} from 'ink'
import {NoteType, type EventLine} from './store.js'

function clock(d: Date): string {
  return d.toTimeString().slice(0, 8)
}

/** The latest events, newest last, one line each. */
export function EventFeed({events, height, errors = []}: {events: EventLine[]; height: number; errors?: string[]}) {
  const lines = events.slice(-Math.max(0, height - (errors.length ? 1 : 0)))
  return (
    <Box flexDirection="column">
      <Text bold dimColor>
        EVENTS
      </Text>
      {errors.length ? (
        <Text color="red" wrap="truncate">
          {errors.at(-1)}
        </Text>
      ) : null}
      {lines.map((e, i) =>
        e.type === NoteType ? (
          <Text key={`${e.time.getTime()}-${i}`} wrap="truncate" dimColor>
            {clock(e.time)} {e.message}
          </Text>
        ) : (
          <Text key={`${e.time.getTime()}-${i}`} wrap="truncate" color={e.type === 'Warning' ? 'yellow' : undefined}>
            <Text dimColor>{clock(e.time)} </Text>
            {e.type === 'Warning' ? 'Warning ' : ''}
            <Text bold>{e.reason}</Text> {e.object}: {e.message}
            {e.count > 1 ? <Text dimColor> (x{e.count})</Text> : null}
          </Text>
        ),
      )}
    </Box>
  )
}
