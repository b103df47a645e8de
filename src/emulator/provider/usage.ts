/**
 * Resource usage the runtime measures and the rest of the node reads (the
 * kubelet API's stats and metrics, the terminal UI): one contract.
 */
export interface ContainerUsage {
  name: string
  /** Cumulative CPU time of the container's processes (user + system, reaped children included), in core-seconds. */
  cpuSeconds: number
  /** The working set, in bytes: the cgroup's usage minus inactive file (cAdvisor), or the live processes' resident memory. */
  memoryBytes: number
  /** The cgroup's whole memory usage (page cache included), where there is a cgroup. */
  memoryUsageBytes?: number
  /** Anonymous resident memory (the cgroup's rss), where there is a cgroup. */
  memoryRssBytes?: number
  /** The main process, while it is alive. */
  pid?: number
  /** Live processes in the container's process group. */
  processes?: number
  /** When this instance of the container started. */
  startTime?: Date
}

export interface PodUsage {
  namespace: string
  name: string
  uid: string
  containers: ContainerUsage[]
}
