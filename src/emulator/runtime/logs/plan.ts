import {allContainerStatusesWithEphemeral, allContainersWithEphemeral} from '../../../common/pods.js'
import type {V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {readdirSync} from 'node:fs'
import {isUid} from '../../../common/names.js'
import {containerLogDir, containerLogFile} from './layout.js'
import type {PodLookup} from '../../provider/logs.js'

/**
 * Which log file a container-logs read takes, decided from the pod's last
 * known status as the kubelet's validateContainerLogStatus does, with the
 * kubelet's messages. Instances are the <restartCount>.log files of the layout.
 */

export type LogPlan = {ok: true; file: string; instance: number; ended: () => boolean} | {ok: false; status: 400 | 404; message: string}

function hasContainer(pod: V1Pod, name: string): boolean {
  return allContainersWithEphemeral(pod).some((c) => c.name === name)
}

function containerStatus(pod: V1Pod, name: string): V1ContainerStatus | undefined {
  return allContainerStatusesWithEphemeral(pod).find((c) => c.name === name)
}

/** The instance numbers that have a log file, ascending. */
export function logInstances(dir: string): number[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  return names
    .map((n) => /^(\d+)\.log$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b)
}

/** The latest instance that has a log file and is older than before. */
function latestBefore(instances: number[], before: number): number | undefined {
  return instances.filter((i) => i < before).pop()
}

export function planContainerLogs(stateDir: string, knownPod: PodLookup, namespace: string, podName: string, container: string, previous: boolean): LogPlan {
  const pod = knownPod(namespace, podName)
  if (!pod) return {ok: false, status: 404, message: `pod "${podName}" does not exist`}
  if (!hasContainer(pod, container)) return {ok: false, status: 404, message: `container "${container}" not found in pod "${podName}"`}
  const uid = pod.metadata?.uid ?? ''
  if (!isUid(uid)) return {ok: false, status: 400, message: `pod "${podName}" has no usable UID`}
  const status = containerStatus(pod, container)
  if (!status) return {ok: false, status: 400, message: `container "${container}" in pod "${podName}" is not available`}
  const restarts = status.restartCount ?? 0
  const {waiting, running, terminated} = status.state ?? {}
  const lastTerminated = status.lastState?.terminated
  const instances = logInstances(containerLogDir(stateDir, namespace, podName, uid, container))
  // The instance the current state describes; a waiting container has none yet.
  const current = running || terminated ? restarts : restarts + 1
  let instance: number | undefined
  if (previous) {
    if (!lastTerminated) return {ok: false, status: 400, message: `previous terminated container "${container}" in pod "${podName}" not found`}
    instance = latestBefore(instances, current)
    if (instance === undefined) return {ok: false, status: 400, message: `previous terminated container "${container}" in pod "${podName}" not found`}
  } else if (running || terminated) {
    instance = restarts
  } else if (lastTerminated) {
    instance = latestBefore(instances, current)
    if (instance === undefined) return {ok: false, status: 400, message: `container "${container}" in pod "${podName}" is terminated`}
  } else if (waiting) {
    const why = {ErrImagePull: "image can't be pulled", ImagePullBackOff: 'trying and failing to pull image'}[waiting.reason ?? ''] ?? waiting.reason
    return {ok: false, status: 400, message: `container "${container}" in pod "${podName}" is waiting to start: ${why}`}
  } else {
    return {ok: false, status: 400, message: `container "${container}" in pod "${podName}" is waiting to start - no logs yet`}
  }
  const chosen = instance
  return {
    ok: true,
    file: containerLogFile(stateDir, namespace, podName, uid, container, chosen),
    instance: chosen,
    // Only the running current instance gets more lines; everything else is finished.
    ended: () => {
      const now = knownPod(namespace, podName)
      if (!now || now.metadata?.uid !== uid) return true
      const s = containerStatus(now, container)
      return !s?.state?.running || (s.restartCount ?? 0) !== chosen
    },
  }
}
