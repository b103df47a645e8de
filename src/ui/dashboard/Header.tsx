import type {V1NodeCondition} from '@kubernetes/client-node'
import {Box, Text} from 'ink'
import {humanAge} from '../../kubectl/pod-status.js'
import {kubeletEndpointText} from '../../kubectl/pods-printer.js'
import {type DashboardModel, formatCores, formatMem} from './store.js'

const ConditionOrder = ['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure']

/** Ready=True is good; for the pressure conditions False is good; Unknown is a warning either way. */
export function conditionColor(c: Pick<V1NodeCondition, 'type' | 'status'>): string {
  if (c.status === 'Unknown' || !c.status) return 'yellow'
  const good = c.type === 'Ready' ? c.status === 'True' : c.status === 'False'
  return good ? 'green' : 'red'
}

function ratio(used: number, total: number | undefined, fmt: (n: number) => string): string {
  return total === undefined ? fmt(used) : `${fmt(used)}/${fmt(total)}`
}

export function Header({model}: {model: DashboardModel}) {
  const conditions = [...model.conditions].sort((a, b) => ConditionOrder.indexOf(a.type) - ConditionOrder.indexOf(b.type))
  const lease = model.lastLeaseRenewal ? `${humanAge(model.now - model.lastLeaseRenewal.getTime())} ago` : 'not yet'
  return (
    <Box flexDirection="column">
      <Text wrap="truncate">
        <Text bold color="cyan">
          {model.nodeName}
        </Text>
        <Text dimColor> on </Text>
        <Text>{model.server || 'connecting…'}</Text>
        {model.serverVersion ? <Text dimColor> (Kubernetes {model.serverVersion})</Text> : null}
      </Text>
      <Text wrap="truncate">
        {conditions.length === 0 ? <Text dimColor>{model.steps.at(-1)?.detail ?? 'starting…'}</Text> : null}
        {conditions.map((c) => (
          <Text key={c.type} color={conditionColor(c)}>
            {c.type}={c.status}
            {'  '}
          </Text>
        ))}
      </Text>
      <Text wrap="truncate">
        <Text dimColor>lease </Text>
        <Text>{lease}</Text>
        <Text dimColor>{'  '}up </Text>
        <Text>{humanAge(model.now - model.startedAt.getTime())}</Text>
        <Text dimColor>{'  '}pods </Text>
        <Text>{ratio(model.podsUsed, model.podsCapacity, String)}</Text>
        <Text dimColor>{'  '}cpu req </Text>
        <Text>{ratio(model.cpuRequested, model.cpuAllocatable, formatCores)}</Text>
        <Text dimColor>{'  '}mem req </Text>
        <Text>{ratio(model.memRequested, model.memAllocatable, formatMem)}</Text>
        {model.sandbox ? <Text dimColor>{'  '}sandbox </Text> : null}
        {model.sandbox ? <Text color={model.sandbox === 'none' ? 'yellow' : undefined}>{model.sandbox}</Text> : null}
        {model.walls ? <Text dimColor>{'  '}walls </Text> : null}
        {model.walls ? <Text>{model.walls}</Text> : null}
        {model.podNetwork === 'pod' ? <Text dimColor>{'  '}network </Text> : null}
        {model.podNetwork === 'pod' ? <Text>pod</Text> : null}
        {/* Ready entries of the warm pool, over what it is sized to now, and its cap. */}
        {model.pool ? <Text dimColor>{'  '}pool </Text> : null}
        {model.pool ? <Text>{`${model.pool.ready}/${model.pool.target}`}</Text> : null}
        {model.pool ? <Text dimColor>{` max ${model.pool.cap}`}</Text> : null}
      </Text>
      {model.podNetwork && model.podNetwork !== 'pod' ? (
        <Text wrap="truncate">
          <Text dimColor>network </Text>
          <Text color="yellow">{model.podNetwork}</Text>
        </Text>
      ) : null}
      {/* A line of its own: a relay's namespace/name and address would be cut off at the end of another. */}
      <Text wrap="truncate">
        <Text dimColor>kubelet </Text>
        <Text>{model.kubeletEndpoint ? kubeletEndpointText(model.kubeletEndpoint.relay, model.kubeletEndpoint.address) : 'not yet'}</Text>
      </Text>
    </Box>
  )
}
