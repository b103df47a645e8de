import {allContainers} from '../../common/pods.js'
import type {V1Pod} from '@kubernetes/client-node'
import {Box, Text} from 'ink'
import {useEffect, useRef, useState} from 'react'
import {type Color, Palette} from '../color.js'
import type {ContainerLogs} from '../../emulator/provider/logs.js'
import {DefaultLogPollMs, type LogLine, PodLogTail} from './log-tail.js'

/** Follows the pod's container logs while mounted; the timer and the follows stop when the pane closes. */
export function useLogTail(logs: ContainerLogs | undefined, pod: V1Pod | undefined, pollMs = DefaultLogPollMs): LogLine[] {
  const [lines, setLines] = useState<LogLine[]>([])
  const uid = pod?.metadata?.uid
  // The latest pod object says which file is current, so restarts are followed.
  const latest = useRef(pod)
  latest.current = pod
  useEffect(() => {
    if (!logs || !latest.current) return
    const tail = new PodLogTail(logs)
    setLines([])
    const poll = () => {
      if (latest.current && tail.poll(latest.current)) setLines(tail.lines.slice())
    }
    poll()
    const timer = setInterval(poll, pollMs)
    return () => {
      clearInterval(timer)
      tail.close()
    }
  }, [logs, uid, pollMs])
  return lines
}

export function LogPane({pod, lines, height}: {pod: V1Pod; lines: LogLine[]; height: number}) {
  const containers = allContainers(pod).map((c) => c.name)
  const colorOf = (c: string): Color => Palette[Math.max(0, containers.indexOf(c)) % Palette.length]
  const multi = containers.length > 1
  const shown = lines.slice(-Math.max(1, height - 1))
  return (
    <Box flexDirection="column">
      <Text bold color="cyan">
        logs {pod.metadata?.namespace}/{pod.metadata?.name}
        <Text dimColor> (following)</Text>
      </Text>
      {shown.length === 0 ? <Text dimColor>no output yet</Text> : null}
      {shown.map((l, i) => (
        <Text key={i} wrap="truncate" color={l.stream === 'stderr' ? 'red' : undefined}>
          {multi ? <Text color={colorOf(l.container)}>{l.container} </Text> : null}
          {l.text}
        </Text>
      ))}
    </Box>
  )
}
