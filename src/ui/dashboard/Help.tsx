import {Box, Text} from 'ink'

const Lines: [string, string][] = [
  ['↑ ↓  j k', 'move the selection'],
  ['enter', 'details of the selected pod: containers, last state, exit codes, probes, events'],
  ['l', "follow the selected pod's logs (all its containers)"],
  ['x', 'kill the selected pod gracefully (deletes it through the API, after confirmation)'],
  ['X', 'force kill (grace period 0), after confirmation'],
  ['s', 'sort by the next column; S reverses the order'],
  ['esc', 'back to the pod table'],
  ['q  ctrl-c', 'stop the node gracefully, showing progress; ctrl-c again exits at once'],
  ['?', 'this help'],
]

export function Help() {
  return (
    <Box flexDirection="column" borderStyle="round" paddingX={1}>
      <Text bold>Keys</Text>
      {Lines.map(([k, d]) => (
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
