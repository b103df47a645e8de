import {allContainers} from '../../common/pods.js'
import type {V1Pod} from '@kubernetes/client-node'
import {type ContainerLogs, isContainerLogRefusal} from '../../emulator/provider/logs.js'

/** Lines the log pane keeps per pod (older ones scroll away). */
export const DefaultLogPaneLines = 500
/** How often the pane looks for a container instance it does not follow yet. */
export const DefaultLogPollMs = 250

export interface LogLine {
  container: string
  stream: 'stdout' | 'stderr'
  text: string
}

interface Follow {
  instance: number
  abort: AbortController
}

/**
 * Follows one pod's container logs through the runtime's container-logs
 * capability (the file of each container's current instance, from its
 * start), joining partial (P) records and keeping the last maxLines. A
 * restart is a new instance: its log is followed from its beginning.
 */
export class PodLogTail {
  readonly lines: LogLine[] = []
  private readonly follows = new Map<string, Follow>()
  private added = false

  constructor(
    private readonly logs: ContainerLogs,
    private readonly maxLines = DefaultLogPaneLines,
  ) {}

  /** Starts following new instances; returns true when lines came since the last poll. */
  poll(pod: V1Pod): boolean {
    for (const c of allContainers(pod)) this.follow(pod, c.name)
    const added = this.added
    this.added = false
    return added
  }

  /** Stops every follow (the pane closed). */
  close(): void {
    for (const f of this.follows.values()) f.abort.abort()
    this.follows.clear()
  }

  private follow(pod: V1Pod, container: string): void {
    const log = this.logs.getContainerLogs({namespace: pod.metadata?.namespace ?? '', pod: pod.metadata?.name ?? '', container}, false)
    const current = this.follows.get(container)
    if (isContainerLogRefusal(log) || current?.instance === log.instance) return
    current?.abort.abort()
    const follow = {instance: log.instance, abort: new AbortController()}
    this.follows.set(container, follow)
    let partial = ''
    void log
      .read(
        (rec) => {
          if (follow.abort.signal.aborted) return true
          if (rec.tag === 'P') {
            partial += rec.content
            return
          }
          this.push({container, stream: rec.stream, text: partial + rec.content})
          partial = ''
        },
        {follow: {signal: follow.abort.signal}},
      )
      .catch(() => undefined)
  }

  private push(line: LogLine): void {
    this.lines.push(line)
    if (this.lines.length > this.maxLines) this.lines.splice(0, this.lines.length - this.maxLines)
    this.added = true
  }
}
