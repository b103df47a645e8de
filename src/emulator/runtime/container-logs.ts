import type {ContainerLog, ContainerLogRefusal, ContainerLogs} from '../provider/logs.js'
import type {ContainerRef} from '../provider/streaming.js'
import {DefaultFollowPollMs, readCriRecords} from './log-reader.js'
import {planContainerLogs, type PodLister} from './log-plan.js'

/**
 * The runtime's container logs (virtual-kubelet's GetContainerLogs) over the
 * CRI log files under stateDir: the file chosen by log-plan.ts from the pods
 * as last known, read by the one reader in log-reader.ts.
 */
export class CriContainerLogs implements ContainerLogs {
  constructor(
    private readonly stateDir: string,
    private readonly pods: PodLister,
    private readonly followPollMs = DefaultFollowPollMs,
  ) {}

  getContainerLogs(ref: ContainerRef, previous: boolean): ContainerLog | ContainerLogRefusal {
    const plan = planContainerLogs(this.stateDir, this.pods, ref.namespace, ref.pod, ref.container, previous)
    if (!plan.ok) return {status: plan.status, message: plan.message}
    return {
      instance: plan.instance,
      read: (onRecord, opts) => readCriRecords(plan.file, opts.tailLines, onRecord, opts.follow ? {ended: plan.ended, signal: opts.follow.signal, pollMs: this.followPollMs} : undefined),
    }
  }
}
