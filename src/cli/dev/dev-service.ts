import {PatchStrategy, setHeaderOptions, type V1Pod} from '@kubernetes/client-node'
import {randomBytes} from 'node:crypto'
import {statSync} from 'node:fs'
import {DevPodLabel, DevWorkloadAnnotation, RestartAnnotation} from '../../common/labels.js'
import {isNotFound} from '../../emulator/kube/errors.js'
import {DefaultTerminationGracePeriodSeconds} from '../../emulator/provider/pod-defaults.js'
import type {DevProgress} from '../../kubectl/dev-report.js'
import {UserError} from '../../errors.js'
import type {KubeSession} from '../session.js'
import {buildDevPod, restartValue, scratchClaims} from './dev-pod.js'
import {FileWatcher} from './file-watch.js'
import {DefaultIgnores, globRegExp, watchRoot, type WatchRoot} from './globs.js'
import {checkNamespaceAllowed, findNode} from './node-choice.js'
import {DevPodFollower, type DevPodEnd} from './pod-follow.js'
import {PortForwarder, type PortMapping} from './port-forward.js'
import {assertScalable, restoreScale, scaleToZero} from './replace.js'
import {readWorkload, workloadText, type WorkloadRef} from './workload.js'

export interface DevOptions {
  namespace: string
  workload: WorkloadRef
  /** -c */
  container?: string
  command: string[]
  cwd: string
  /** --node; default: the only Ready vnode node. */
  node?: string
  replace: boolean
  watch: boolean
  /** Directories or globs (default: cwd). */
  watchPaths: string[]
  /** Globs added to DefaultIgnores. */
  ignore: string[]
  ports: PortMapping[]
  probes: boolean
  debounceMs?: number
  /** Aborted when dev must end (Ctrl-C, SIGTERM, the terminal closing). */
  signal: AbortSignal
}

/** After the grace period, a deleted pod still there is not waited for longer than this. */
export const DeleteWaitMarginMs = 15_000
const MergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch)

/**
 * `kubectl vnode dev`: everything that can refuse is checked first (the
 * workload, the container, the node, the local ports), so a refusal leaves
 * nothing behind; then the workload is scaled to zero (--replace), the dev
 * pod created, followed, restarted on each save, and at the end deleted and
 * the scale restored, whatever ends it. Resolves to dev's exit code.
 */
export async function runDev(session: KubeSession, o: DevOptions, emit: (p: DevProgress) => void): Promise<number> {
  const workload = await readWorkload(session, o.namespace, o.workload)
  if (o.replace) assertScalable(o.workload)
  const node = await findNode(session, o.node)
  checkNamespaceAllowed(node, o.namespace)
  const roots = o.watch ? watchRoots(o) : []
  const pod = buildDevPod({workload, namespace: o.namespace, container: o.container, command: o.command, cwd: o.cwd, node, probes: o.probes, suffix: randomBytes(3).toString('hex').slice(0, 5)})
  const name = pod.metadata!.name!
  const container = pod.metadata!.annotations![RestartAnnotation].split(':')[0]
  const forwarder = new PortForwarder(session, o.ports, (message) => emit({kind: 'warning', message}))
  await forwarder.listen()
  let replaced = false
  let created = false
  try {
    if (o.replace) {
      // Set first: a scale-down that fails halfway (saved, not scaled) is undone too.
      replaced = true
      const down = await scaleToZero(session, o.namespace, o.workload, name)
      emit({kind: 'scaled-down', workload: workloadText(o.workload), replicas: down.saved.replicas, earlier: down.earlier, autoscalers: down.autoscalers})
    }
    if (o.signal.aborted) return 0
    await session.core.createNamespacedPod({namespace: o.namespace, body: pod})
    created = true
    emit({kind: 'created', pod: name, namespace: o.namespace, node: node.name, container, command: o.command})
    for (const v of scratchClaims(workload, workload.template.spec!)) {
      emit({kind: 'warning', message: `volume ${v.name} (a volumeClaimTemplate of ${workloadText(o.workload)}) is an empty directory in the dev pod, not a replica's claim`})
    }
    forwarder.forwardTo(o.namespace, name)
    for (const m of o.ports) emit({kind: 'forwarding', local: m.local, pod: m.pod})
    const result = await follow(session, o, name, container, roots, emit)
    // Deleted by someone else: nothing left to delete.
    if (result.podGone) created = false
    return result.code
  } finally {
    forwarder.close()
    if (created) await deleteDevPod(session, o.namespace, pod, emit)
    if (replaced) emit({kind: 'restore', workload: workloadText(o.workload), outcome: await restoreScale(session, o.namespace, o.workload)})
  }
}

/** Follows the pod until it ends by itself or dev is asked to end; restarts it on each change of a watched file. */
async function follow(session: KubeSession, o: DevOptions, name: string, container: string, roots: WatchRoot[], emit: (p: DevProgress) => void): Promise<{code: number; podGone: boolean}> {
  const follower = new DevPodFollower(session, o.namespace, name, container, emit)
  let generation = 0
  const watcher = new FileWatcher({
    cwd: o.cwd,
    roots,
    ignore: [...DefaultIgnores, ...o.ignore].map(globRegExp),
    debounceMs: o.debounceMs,
    onChange: (paths) => {
      generation++
      emit({kind: 'restart-requested', paths, generation})
      follower.restartRequested(paths)
      const body = {metadata: {annotations: {[RestartAnnotation]: restartValue(container, generation)}}}
      session.core
        .patchNamespacedPod({name, namespace: o.namespace, body}, MergePatch)
        .catch((error: unknown) => emit({kind: 'warning', message: `could not ask for a restart: ${(error as Error).message}`}))
    },
  })
  try {
    follower.start()
    if (roots.length > 0) {
      await watcher.start()
      emit({kind: 'watching', roots: roots.map((r) => r.dir), directories: watcher.size})
    }
    const stopped = new Promise<'stopped'>((resolve) => {
      if (o.signal.aborted) resolve('stopped')
      o.signal.addEventListener('abort', () => resolve('stopped'), {once: true})
    })
    const end = await Promise.race([follower.ended, stopped])
    if (end === 'stopped') return {code: 0, podGone: false}
    await follower.drainLogs()
    return {code: reportEnd(end, container, name, emit), podGone: end.kind === 'gone'}
  } finally {
    watcher.close()
    follower.close()
  }
}

function reportEnd(end: DevPodEnd, container: string, pod: string, emit: (p: DevProgress) => void): number {
  if (end.kind === 'exited') {
    emit({kind: 'exited', container, exit: end.exit})
    return end.exit.exitCode
  }
  if (end.kind === 'failed') emit({kind: 'failed', reason: end.reason, message: end.message})
  else emit({kind: 'gone', pod})
  return 1
}

/** The watch roots of --watch-path (default: the current directory); a path that does not exist is refused before anything is created. */
function watchRoots(o: DevOptions): WatchRoot[] {
  const isDirectory = (p: string) => {
    try {
      return statSync(p).isDirectory()
    } catch {
      return false
    }
  }
  const paths = o.watchPaths.length > 0 ? o.watchPaths : [o.cwd]
  return paths.map((p) => {
    const root = watchRoot(o.cwd, p, isDirectory)
    if (!isDirectory(root.dir)) throw new UserError(`--watch-path ${p}: ${root.dir} is not a directory`)
    return root
  })
}

/** Deletes the dev pod (the node stops its processes within the grace period) and waits, bounded, for it to be gone. */
async function deleteDevPod(session: KubeSession, namespace: string, pod: V1Pod, emit: (p: DevProgress) => void): Promise<void> {
  const name = pod.metadata!.name!
  const grace = pod.spec?.terminationGracePeriodSeconds ?? DefaultTerminationGracePeriodSeconds
  emit({kind: 'deleting', pod: name, gracePeriodSeconds: grace})
  try {
    await session.core.deleteNamespacedPod({name, namespace})
  } catch (error) {
    if (!isNotFound(error)) emit({kind: 'warning', message: `could not delete pod ${name}: ${(error as Error).message}`})
    return
  }
  const deadline = Date.now() + grace * 1000 + DeleteWaitMarginMs
  while (Date.now() < deadline) {
    try {
      await session.core.readNamespacedPod({name, namespace})
    } catch (error) {
      if (isNotFound(error)) return emit({kind: 'deleted', pod: name})
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  emit({kind: 'warning', message: `pod ${name} is still terminating; it goes once its node has stopped it`})
}

/**
 * `dev --restore`: what a dev that was killed left behind: its dev pods of
 * the workload are deleted, and a scale it saved is restored.
 */
export async function runRestore(session: KubeSession, namespace: string, ref: WorkloadRef, emit: (p: DevProgress) => void): Promise<number> {
  await readWorkload(session, namespace, ref)
  const what = workloadText(ref)
  const list = await session.core.listNamespacedPod({namespace, labelSelector: `${DevPodLabel}=true`})
  const leftovers = list.items.filter((p) => p.metadata?.annotations?.[DevWorkloadAnnotation] === what && !p.metadata?.deletionTimestamp)
  for (const p of leftovers) await session.core.deleteNamespacedPod({name: p.metadata!.name!, namespace}).catch(() => undefined)
  emit({kind: 'cleaned', pods: leftovers.map((p) => p.metadata!.name!)})
  if (ref.kind === 'deployment' || ref.kind === 'statefulset') emit({kind: 'restore', workload: what, outcome: await restoreScale(session, namespace, ref)})
  return 0
}
