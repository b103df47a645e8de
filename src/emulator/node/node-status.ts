import type {V1Node, V1NodeCondition, V1NodeStatus, V1Taint} from '@kubernetes/client-node'
import type {HostIdentity, HostReading} from './host.js'
import {formatBytes, formatCpu} from '../quantity.js'
import {EventReason} from '../kube/event-reasons.js'

import {LastAppliedStatusAnnotation} from '../../common/labels.js'
export {CordonedByAnnotation, LastAppliedStatusAnnotation, NodeMarkerLabel} from '../../common/labels.js'
export const DefaultTaint: V1Taint = {key: 'virtual-kubelet.io/provider', value: 'vnode', effect: 'NoSchedule'}
export const DefaultMaxPods = 110

/** The kubelet's default hard eviction thresholds, used for the pressure conditions. */
export const MemoryAvailableThresholdBytes = 100 * 2 ** 20
export const DiskAvailableThresholdFraction = 0.1
/** The kubelet sets no default for pid.available; vnode reports pressure with less than 10% of pid_max left. */
export const PidAvailableThresholdFraction = 0.1

export interface NodeSpecConfig {
  name: string
  nodeIP: string
  port: number
  labels: Record<string, string>
  /** Annotations vnode owns on its Node (the walls it builds), kept in line on each registration. */
  annotations?: Record<string, string>
  taints: V1Taint[]
  cpu?: number
  memoryBytes?: number
  pods: number
  kubeletVersion: string
  runtimeVersion: string
}

export type ConditionType = 'MemoryPressure' | 'DiskPressure' | 'PIDPressure' | 'Ready'

interface ConditionText {
  reason: string
  message: string
  event: string
}

/** The kubelet's reasons, messages and events, per condition and status. */
export const ConditionTexts: Record<ConditionType, {True: ConditionText; False: ConditionText}> = {
  MemoryPressure: {
    False: {reason: 'KubeletHasSufficientMemory', message: 'kubelet has sufficient memory available', event: EventReason.NodeHasSufficientMemory},
    True: {reason: 'KubeletHasInsufficientMemory', message: 'kubelet has insufficient memory available', event: EventReason.NodeHasInsufficientMemory},
  },
  DiskPressure: {
    False: {reason: 'KubeletHasNoDiskPressure', message: 'kubelet has no disk pressure', event: EventReason.NodeHasNoDiskPressure},
    True: {reason: 'KubeletHasDiskPressure', message: 'kubelet has disk pressure', event: EventReason.NodeHasDiskPressure},
  },
  PIDPressure: {
    False: {reason: 'KubeletHasSufficientPID', message: 'kubelet has sufficient PID available', event: EventReason.NodeHasSufficientPID},
    True: {reason: 'KubeletHasInsufficientPID', message: 'kubelet has insufficient PID available', event: EventReason.NodeHasInsufficientPID},
  },
  Ready: {
    True: {reason: 'KubeletReady', message: 'kubelet is posting ready status', event: EventReason.NodeReady},
    False: {reason: 'KubeletNotReady', message: 'kubelet is not ready', event: EventReason.NodeNotReady},
  },
}

export interface ConditionValues {
  MemoryPressure: boolean
  DiskPressure: boolean
  PIDPressure: boolean
  Ready: boolean
  /** Why the node is not ready, when it is not. */
  notReadyMessage?: string
}

export function pressureFrom(reading: HostReading): Omit<ConditionValues, 'Ready'> {
  return {
    MemoryPressure: reading.memoryAvailableBytes < MemoryAvailableThresholdBytes,
    DiskPressure: reading.diskTotalBytes === 0 || reading.diskAvailableBytes < reading.diskTotalBytes * DiskAvailableThresholdFraction,
    PIDPressure: reading.pidMax - reading.processes < reading.pidMax * PidAvailableThresholdFraction,
  }
}

/**
 * Conditions in the kubelet's order (Ready last). lastTransitionTime moves
 * only when a status flips; heartbeat is now.
 */
export function buildConditions(values: ConditionValues, previous: V1NodeCondition[] | undefined, now: Date): V1NodeCondition[] {
  const types: ConditionType[] = ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready']
  return types.map((type) => {
    const status = values[type] ? 'True' : 'False'
    const text = ConditionTexts[type][status]
    const prev = previous?.find((c) => c.type === type)
    const message = type === 'Ready' && !values.Ready && values.notReadyMessage ? values.notReadyMessage : text.message
    return {
      type,
      status,
      reason: text.reason,
      message,
      lastHeartbeatTime: now,
      lastTransitionTime: prev && prev.status === status && prev.lastTransitionTime ? new Date(prev.lastTransitionTime) : now,
    }
  })
}

export function buildResources(reading: HostReading, cfg: NodeSpecConfig): Pick<V1NodeStatus, 'capacity' | 'allocatable'> {
  const cpu = cfg.cpu ?? reading.cpuCores
  const memory = cfg.memoryBytes ?? reading.memoryTotalBytes
  return {
    capacity: {
      cpu: formatCpu(cpu),
      memory: formatBytes(memory),
      'ephemeral-storage': formatBytes(reading.diskTotalBytes),
      pods: String(cfg.pods),
    },
    // capacity minus the hard eviction thresholds, as the kubelet computes it (no reservations).
    allocatable: {
      cpu: formatCpu(cpu),
      memory: formatBytes(memory - MemoryAvailableThresholdBytes),
      'ephemeral-storage': formatBytes(reading.diskTotalBytes * (1 - DiskAvailableThresholdFraction)),
      pods: String(cfg.pods),
    },
  }
}

export function buildStatus(reading: HostReading, identity: HostIdentity, cfg: NodeSpecConfig, values: ConditionValues, previous: V1NodeCondition[] | undefined, now: Date): V1NodeStatus {
  return {
    ...buildResources(reading, cfg),
    conditions: buildConditions(values, previous, now),
    // An IP address only: the API server dials a Hostname address first (--kubelet-preferred-address-types'
    // default), and a workstation's name rarely resolves from a cluster. A Hostname an earlier run published is deleted.
    addresses: [{type: 'InternalIP', address: cfg.nodeIP}],
    daemonEndpoints: {kubeletEndpoint: {Port: cfg.port}},
    nodeInfo: {
      machineID: identity.machineID,
      systemUUID: identity.systemUUID,
      bootID: identity.bootID,
      kernelVersion: identity.kernelVersion,
      osImage: identity.osImage,
      containerRuntimeVersion: cfg.runtimeVersion,
      kubeletVersion: cfg.kubeletVersion,
      kubeProxyVersion: '',
      operatingSystem: identity.operatingSystem,
      architecture: identity.architecture,
    },
  }
}

/** Status as compared and stashed: without heartbeat times, JSON-normalised. */
export function comparable(status: V1NodeStatus): V1NodeStatus {
  const copy = JSON.parse(JSON.stringify(status)) as V1NodeStatus
  for (const c of copy.conditions ?? []) delete c.lastHeartbeatTime
  return copy
}

function byType<T extends {type?: string}>(items: T[] | undefined): Map<string, T> {
  return new Map((items ?? []).map((i) => [i.type ?? '', i]))
}

/**
 * The body of a three-way strategic merge patch of node status. lastApplied is
 * what vnode wrote last time (stashed in an annotation); current fields written
 * by others are never in the patch, so they survive. What vnode wrote before
 * and no longer wants is deleted explicitly. With no lastApplied (a node made
 * by someone else or an older version), nothing is deleted.
 */
export function threeWayStatusPatch(lastApplied: V1NodeStatus | undefined, desired: V1NodeStatus): Record<string, unknown> {
  const status: Record<string, unknown> = JSON.parse(JSON.stringify(desired))
  if (lastApplied) {
    const want = byType(desired.conditions)
    const gone = [...byType(lastApplied.conditions).keys()].filter((t) => !want.has(t))
    if (gone.length > 0) status.conditions = [...(desired.conditions ?? []).map((c) => JSON.parse(JSON.stringify(c))), ...gone.map((type) => ({type, $patch: 'delete'}))]
    const wantAddr = byType(desired.addresses)
    const goneAddr = [...byType(lastApplied.addresses).keys()].filter((t) => !wantAddr.has(t))
    if (goneAddr.length > 0) status.addresses = [...(desired.addresses ?? []), ...goneAddr.map((type) => ({type, $patch: 'delete'}))]
    for (const field of ['capacity', 'allocatable'] as const) {
      const next = {...(desired[field] ?? {})} as Record<string, string | null>
      for (const k of Object.keys(lastApplied[field] ?? {})) if (!(k in next)) next[k] = null
      status[field] = next
    }
  }
  return {
    metadata: {annotations: {[LastAppliedStatusAnnotation]: JSON.stringify(comparable(desired))}},
    status,
  }
}

/** The status vnode applied last, from the node's annotation; undefined when absent or unreadable. */
export function lastAppliedStatus(node: V1Node | undefined): V1NodeStatus | undefined {
  const raw = node?.metadata?.annotations?.[LastAppliedStatusAnnotation]
  if (!raw) return undefined
  try {
    return JSON.parse(raw) as V1NodeStatus
  } catch {
    return undefined
  }
}
