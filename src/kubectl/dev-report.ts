/**
 * What `kubectl vnode dev` reports while it runs: the dev service emits
 * these and the ui prints them, so neither imports the other.
 */

/** How a container instance ended (its status's terminated state). */
export interface InstanceExit {
  exitCode: number
  signal?: number
  reason?: string
}

/** The outcome of scaling a replaced workload back (cli/dev/replace.ts). */
export type RestoreOutcome = {kind: 'restored'; replicas: number} | {kind: 'nothing'} | {kind: 'kept'; replicas: number; saved: number}

export type DevProgress =
  /** --replace: the workload is at zero; earlier: an earlier dev's saved scale was kept. */
  | {kind: 'scaled-down'; workload: string; replicas: number; earlier: boolean; autoscalers: string[]}
  | {kind: 'created'; pod: string; namespace: string; node: string; container: string; command: string[]}
  | {kind: 'forwarding'; local: number; pod: number}
  | {kind: 'watching'; roots: string[]; directories: number}
  /** A new instance of the dev container runs. */
  | {kind: 'started'; container: string; restartCount: number}
  /** It waits, and why (ContainerCreating, CrashLoopBackOff, CreateContainerError...). */
  | {kind: 'waiting'; container: string; reason: string; message?: string}
  /** A line of the dev container's log. */
  | {kind: 'log'; line: string}
  /** Watched files changed: a restart is asked of the node. */
  | {kind: 'restart-requested'; paths: string[]; generation: number}
  /** The container was restarted; why: the files that changed, or how the instance before ended. */
  | {kind: 'restarted'; container: string; restartCount: number; files?: string[]; exit?: InstanceExit}
  /** A Warning event of the pod (a port in use, a volume that cannot be mounted, limits not enforced). */
  | {kind: 'event'; reason: string; message: string}
  /** It ended for good (a Job's, or restartPolicy Never): dev exits with its code. */
  | {kind: 'exited'; container: string; exit: InstanceExit}
  /** The node refused or failed the pod before its container ran (an admission rule, a namespace it does not accept). */
  | {kind: 'failed'; reason: string; message: string}
  /** The pod was deleted by someone else. */
  | {kind: 'gone'; pod: string}
  /** dev is ending: what ends it. */
  | {kind: 'stopping'; why: string}
  /** The dev pod's deletion is asked for: the node stops it within the grace period. */
  | {kind: 'deleting'; pod: string; gracePeriodSeconds: number}
  | {kind: 'deleted'; pod: string}
  | {kind: 'restore'; workload: string; outcome: RestoreOutcome}
  /** Leftover dev pods `--restore` deleted. */
  | {kind: 'cleaned'; pods: string[]}
  | {kind: 'warning'; message: string}
