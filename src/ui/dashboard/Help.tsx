import {Box, Text} from 'ink'
import {helpLines} from './keys.js'

export function Help() {
  return (
    <Box flexDirection="column" borderStyle="round" paddingX={1}>
      <Text bold>Keys</Text>
      {helpLines().map(([k, d]) => (
        <Text key={k}>
          <Text bold color="cyan">
            {k.padEnd(12)}
          </Text>
          {d}
        </Text>
      ))}
    </Box>
  )
}
