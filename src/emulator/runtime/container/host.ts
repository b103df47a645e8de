import type {V1Pod} from '@kubernetes/client-node'
import type {Clock} from '../../../common/clock.js'
import type {ProviderContext} from '../../provider/handler.js'
import type {NodeCgroups} from '../cgroups/node-cgroups.js'
import type {NodeFacts} from '../env/env.js'
import type {ImageMap} from '../images/image-map.js'
import type {LogRotation} from '../logs/writer.js'
import type {SyncClock} from '../pod/sync-clock.js'
import type {ContainerProcess} from '../process/container-process.js'
import type {FifoMaker} from '../process/instance-io.js'
import type {MountBaseChoice} from '../sandbox/mount-base.js'
import type {PodSandbox} from '../sandbox/pod-sandbox.js'
import type {SandboxMode, SandboxWalls} from '../sandbox/spec.js'
import type {ContainerState} from './state.js'

/** What starting and stopping a container need of the node. */
export interface ContainerRuntimeDeps {
  ctx: ProviderContext
  images: ImageMap
  node: NodeFacts
  rotation: LogRotation
  /** The kubelet's relist and sync back-off: when a start is seen, when a failed sync is retried. */
  sync: SyncClock
  /** Containers' default PATH: the one `up` was started with. */
  path?: string
  /** namespaces: each container in a pod sandbox (sandbox/); none: a bare host process. */
  sandboxMode: SandboxMode
  /** The node's walls in namespaces mode: writable layers, hidden paths. */
  walls?: SandboxWalls
  /** The node's cgroup tree; undefined where none can be made (the plain mode). */
  cgroups?: NodeCgroups
  /** On the host network: warns when a container's declared ports are already taken on the host. */
  checkHostPorts?: (pod: V1Pod, container: ContainerState) => Promise<void>
  /** The node's maker of the instances' output pipes, with its reserve of pipes made ahead. */
  fifos?: FifoMaker
  /** The mount namespace a sandboxed start with these binds begins from, and its layer of hidden paths (sandbox/mount-base.ts); the host's when undefined. */
  mountBase?: (binds: readonly {source: string}[]) => Promise<MountBaseChoice | undefined> | undefined
}

/** How far a pod is towards its end. */
export interface PodEnd {
  /** Nothing will start again (terminal by itself, deadline, or deletion). */
  readonly finished: boolean
  readonly isTerminating: boolean
  /** When every container of a terminating pod must be gone (epoch ms; Infinity before). */
  readonly deadline: number
  /** Aborted when the pod terminates: a running postStart hook ends. */
  readonly signal: AbortSignal
}

/** The pod a container's verbs (start, stop, hooks) act in: pod/pod-runtime.ts is it. */
export interface ContainerHost {
  readonly pod: V1Pod
  readonly containers: readonly ContainerState[]
  readonly deps: ContainerRuntimeDeps
  readonly sandbox: PodSandbox
  readonly clock: Clock
  /** Where the pod stands towards its end (pod/termination.ts). */
  readonly end: PodEnd
  /** When the runtime took the pod (its first sync): probe workers tick from then. */
  readonly createdAt: number
  /** The pod's grace period, in ms. */
  podGraceMs(): number
  /** The waiting reason of a container that has not started. */
  defaultWaiting(): string
  event(c: ContainerState, type: 'Normal' | 'Warning', reason: string, message: string): void
  podEvent(type: 'Normal' | 'Warning', reason: string, message: string): void
  /** The sync failed: the next one comes on the pod worker's clock. */
  retrySyncLater(): void
  /** No retry of a failed setup or config before at (epoch ms; 0: none, at once). */
  retryAt(at: number): void
  /** A started or adopted instance: its exit, its record, its probes. */
  watchProcess(c: ContainerState, proc: ContainerProcess): void
  /** An exit of c the relist has not seen yet is seen now (a stop acts on the container as it is). */
  seeExit(c: ContainerState): void
  /** A start shows at the relist that sees it. */
  publishWhenObserved(): void
  writeRecord(): void
  /** Reports the pod's status if it changed. */
  publish(): void
  kick(): void
  /** A kill is over: the next relist syncs the pod again. */
  syncAtNextRelist(): void
}
