import type {ContainerLog, ContainerLogRefusal, ContainerLogs, PodLookup} from '../../provider/logs.js'
import type {ContainerRef} from '../../provider/streaming.js'
import {DefaultFollowPollMs, readCriRecords} from './reader.js'
import {planContainerLogs} from './plan.js'

/**
 * The runtime's container logs (virtual-kubelet's GetContainerLogs) over the
 * CRI log files under stateDir: the file chosen by plan.ts from the pod as
 * the node last wrote its status (one lookup, no copy), read by the one
 * reader in reader.ts.
 */
export class CriContainerLogs implements ContainerLogs {
  constructor(
    private readonly stateDir: string,
    private readonly knownPod: PodLookup,
    private readonly followPollMs = DefaultFollowPollMs,
  ) {}

  getContainerLogs(ref: ContainerRef, previous: boolean): ContainerLog | ContainerLogRefusal {
    const plan = planContainerLogs(this.stateDir, this.knownPod, ref.namespace, ref.pod, ref.container, previous)
    if (!plan.ok) return {status: plan.status, message: plan.message}
    return {
      instance: plan.instance,
      read: (onRecord, opts) => readCriRecords(plan.file, opts.tailLines, onRecord, opts.follow ? {ended: plan.ended, signal: opts.follow.signal, pollMs: this.followPollMs} : undefined),
    }
  }
}
