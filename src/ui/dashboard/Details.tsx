import type {V1ContainerState, V1ContainerStatus, V1Pod, V1Probe} from '@kubernetes/client-node'
import {Box, Text} from 'ink'
import type {ReactElement} from 'react'
import {humanAge, podStatus} from '../../kubectl/pod-status.js'
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

interface ContainerLike {
  name: string
  image?: string
  livenessProbe?: V1Probe
  readinessProbe?: V1Probe
  startupProbe?: V1Probe
}

function containerLines(spec: ContainerLike, status: V1ContainerStatus | undefined, now: number, init: boolean): ReactElement[] {
  const key = `${init ? 'i' : 'c'}-${spec.name}`
  const lines: ReactElement[] = [
    <Text key={`${key}-h`} wrap="truncate">
      <Text bold>
        {init ? 'init ' : ''}
        {spec.name}
      </Text>
      <Text dimColor> {spec.image}</Text>
    </Text>,
    <Text key={`${key}-s`} wrap="truncate">
      {'  State:      '}
      {stateText(status?.state, now)}
    </Text>,
  ]
  if (status?.lastState?.terminated) {
    lines.push(
      <Text key={`${key}-l`} wrap="truncate">
        {'  Last State: '}
        {stateText(status.lastState, now)}
      </Text>,
    )
  }
  lines.push(
    <Text key={`${key}-r`} wrap="truncate">
      {'  Ready: '}
      {status?.ready ? 'True' : 'False'}
      {'   Restarts: '}
      {status?.restartCount ?? 0}
    </Text>,
  )
  for (const [k, p] of [
    ['Liveness', spec.livenessProbe],
    ['Readiness', spec.readinessProbe],
    ['Startup', spec.startupProbe],
  ] as const) {
    const t = probeText(p)
    if (t)
      lines.push(
        <Text key={`${key}-${k}`} wrap="truncate">
          {'  '}
          {k}: {t}
        </Text>,
      )
  }
  return lines
}

/**
 * The selected pod in depth: containers, last state and exit codes, probes,
 * its recent events. Built as lines and cut to the height, so it never
 * overflows the pane.
 */
export function Details({pod, events, now, height}: {pod: V1Pod; events: EventLine[]; now: number; height: number}) {
  const uid = pod.metadata?.uid
  const statusOf = (name: string, init: boolean) => (init ? pod.status?.initContainerStatuses : pod.status?.containerStatuses)?.find((c) => c.name === name)
  const lines: ReactElement[] = [
    <Text key="title" wrap="truncate">
      <Text bold color="cyan">
        {pod.metadata?.namespace}/{pod.metadata?.name}
      </Text>
      <Text> {podStatus(pod)}</Text>
      <Text dimColor>
        {'  IP '}
        {pod.status?.podIP ?? '<none>'}
        {'  QoS '}
        {pod.status?.qosClass ?? '-'}
        {'  uid '}
        {uid}
      </Text>
    </Text>,
  ]
  for (const c of pod.spec?.initContainers ?? []) lines.push(...containerLines(c, statusOf(c.name, true), now, true))
  for (const c of pod.spec?.containers ?? []) lines.push(...containerLines(c, statusOf(c.name, false), now, false))
  const mine = events.filter((e) => (uid && e.uid === uid) || e.object === `pod/${pod.metadata?.name}`)
  lines.push(
    <Text key="ev" bold dimColor>
      EVENTS
    </Text>,
  )
  if (mine.length === 0)
    lines.push(
      <Text key="ev-none" dimColor>
        none seen since the dashboard started
      </Text>,
    )
  // The newest events, as many as fit.
  const room = Math.max(1, height - lines.length)
  mine.slice(-room).forEach((e, i) =>
    lines.push(
      <Text key={`ev-${i}`} wrap="truncate" color={e.type === 'Warning' ? 'yellow' : undefined}>
        {e.reason}: {e.message}
        {e.count > 1 ? ` (x${e.count})` : ''}
      </Text>,
    ),
  )
  return <Box flexDirection="column">{lines.slice(0, Math.max(1, height))}</Box>
}
