import type {V1ContainerState, V1ContainerStatus, V1Pod, V1Probe} from '@kubernetes/client-node'
import {Box, Text} from 'ink'
import {humanAge, podStatus} from '../pod-status.js'
import type {EventLine} from './store.js'

export function stateText(s: V1ContainerState | undefined, now: number): string {
  if (s?.running) return `Running${s.running.startedAt ? ` for ${humanAge(now - new Date(s.running.startedAt).getTime())}` : ''}`
  if (s?.waiting) return `Waiting: ${s.waiting.reason ?? ''}${s.waiting.message ? ` (${s.waiting.message})` : ''}`
  if (s?.terminated) {
    const t = s.terminated
    return `Terminated: exit code ${t.exitCode}${t.signal ? `, signal ${t.signal}` : ''}${t.reason ? ` (${t.reason})` : ''}${t.message ? `: ${t.message}` : ''}`
  }
  return '-'
}

/** A probe in one line, the way kubectl describe prints it. */
export function probeText(p: V1Probe | undefined): string | undefined {
  if (!p) return undefined
  let how = 'unknown'
  if (p.httpGet) how = `http-get ${p.httpGet.scheme === 'HTTPS' ? 'https' : 'http'}://${p.httpGet.host ?? ''}:${p.httpGet.port}${p.httpGet.path ?? '/'}`
  else if (p.tcpSocket) how = `tcp-socket :${p.tcpSocket.port}`
  else if (p.exec) how = `exec [${(p.exec.command ?? []).join(' ')}]`
  else if (p.grpc) how = `grpc :${p.grpc.port}`
  return `${how} delay=${p.initialDelaySeconds ?? 0}s timeout=${p.timeoutSeconds ?? 1}s period=${p.periodSeconds ?? 10}s #success=${p.successThreshold ?? 1} #failure=${p.failureThreshold ?? 3}`
}

function ContainerBlock({spec, status, now, init}: {spec: {name: string; image?: string; livenessProbe?: V1Probe; readinessProbe?: V1Probe; startupProbe?: V1Probe}; status?: V1ContainerStatus; now: number; init: boolean}) {
  const probes: [string, string | undefined][] = [
    ['Liveness', probeText(spec.livenessProbe)],
    ['Readiness', probeText(spec.readinessProbe)],
    ['Startup', probeText(spec.startupProbe)],
  ]
  return (
    <Box flexDirection="column" marginBottom={0}>
      <Text wrap="truncate">
        <Text bold>{init ? 'init ' : ''}{spec.name}</Text>
        <Text dimColor> {spec.image}</Text>
      </Text>
      <Text wrap="truncate">  State:      {stateText(status?.state, now)}</Text>
      {status?.lastState?.terminated ? <Text wrap="truncate">  Last State: {stateText(status.lastState, now)}</Text> : null}
      <Text wrap="truncate">
        {'  '}Ready: {status?.ready ? 'True' : 'False'}   Restarts: {status?.restartCount ?? 0}
      </Text>
      {probes
        .filter(([, t]) => t)
        .map(([k, t]) => (
          <Text key={k} wrap="truncate">
            {'  '}
            {k}: {t}
          </Text>
        ))}
    </Box>
  )
}

/** The selected pod in depth: containers, last state and exit codes, probes, its recent events. */
export function Details({pod, events, now, height}: {pod: V1Pod; events: EventLine[]; now: number; height: number}) {
  const uid = pod.metadata?.uid
  const mine = events.filter((e) => (uid && e.uid === uid) || e.object === `pod/${pod.metadata?.name}`).slice(-Math.max(3, Math.floor(height / 3)))
  const statusOf = (name: string, init: boolean) => (init ? pod.status?.initContainerStatuses : pod.status?.containerStatuses)?.find((c) => c.name === name)
  return (
    <Box flexDirection="column" height={height} overflow="hidden">
      <Text wrap="truncate">
        <Text bold color="cyan">
          {pod.metadata?.namespace}/{pod.metadata?.name}
        </Text>
        <Text> {podStatus(pod)}</Text>
        <Text dimColor>
          {' '}
          IP {pod.status?.podIP ?? '<none>'}  QoS {pod.status?.qosClass ?? '-'}  uid {uid}
        </Text>
      </Text>
      {(pod.spec?.initContainers ?? []).map((c) => (
        <ContainerBlock key={`i-${c.name}`} spec={c} status={statusOf(c.name, true)} now={now} init />
      ))}
      {(pod.spec?.containers ?? []).map((c) => (
        <ContainerBlock key={c.name} spec={c} status={statusOf(c.name, false)} now={now} init={false} />
      ))}
      <Text bold dimColor>
        EVENTS
      </Text>
      {mine.length === 0 ? <Text dimColor>none seen since the dashboard started</Text> : null}
      {mine.map((e, i) => (
        <Text key={i} wrap="truncate" color={e.type === 'Warning' ? 'yellow' : undefined}>
          {e.reason}: {e.message}
          {e.count > 1 ? ` (x${e.count})` : ''}
        </Text>
      ))}
    </Box>
  )
}
