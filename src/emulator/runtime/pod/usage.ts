import type {NodeCgroups} from '../cgroups/node-cgroups.js'
import {cgroupUsage} from '../cgroups/usage.js'
import {processGroups} from '../process/proc.js'
import {processGroupUsage, type PodUsage} from '../process/usage.js'
import type {PodRuntime} from './pod-runtime.js'

/** Per-container CPU, memory and process count of the node's pods: from the cgroups' accounting where there are cgroups, else from /proc. */
export function podsUsage(runtimes: PodRuntime[], cgroups: NodeCgroups | undefined): PodUsage[] {
  if (cgroups) {
    return runtimes.map((rt) => ({
      namespace: rt.pod.metadata!.namespace!,
      name: rt.pod.metadata!.name!,
      uid: rt.uid,
      containers: rt.containers.flatMap((c) => {
        const path = c.proc ? rt.sandbox.cgroup.containerPath(c.name) : undefined
        return c.proc && path ? [cgroupUsage(cgroups, c.name, path, c.proc.pid, c.proc.startedAt)] : []
      }),
    }))
  }
  const groups = processGroups(new Set(runtimes.flatMap((rt) => rt.containers.filter((c) => c.proc).map((c) => c.proc!.pgid))))
  return runtimes.map((rt) => ({
    namespace: rt.pod.metadata!.namespace!,
    name: rt.pod.metadata!.name!,
    uid: rt.uid,
    containers: rt.containers.filter((c) => c.proc).map((c) => processGroupUsage(c.name, c.proc!.pgid, c.proc!.startedAt, groups.get(c.proc!.pgid) ?? [], c.proc)),
  }))
}
