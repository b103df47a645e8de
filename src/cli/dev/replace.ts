import {PatchStrategy, setHeaderOptions} from '@kubernetes/client-node'
import {DevReplacedAnnotation} from '../../common/labels.js'
import type {RestoreOutcome} from '../../kubectl/dev-report.js'
import {UserError} from '../../errors.js'
import type {KubeSession} from '../session.js'
import {readWorkload, workloadText, type WorkloadRef} from './workload.js'

/**
 * `dev --replace`: the workload is scaled to zero so the dev pod is the only
 * one, and scaled back when dev ends. What to scale back to is saved first,
 * in an annotation on the workload itself, so it survives a dev that is
 * killed: `dev --restore` reads it there.
 */

/** The annotation's content (JSON). */
export interface SavedScale {
  /** spec.replicas before the first scale-down. */
  replicas: number
  /** The dev pod that replaced it. */
  pod: string
  /** When (RFC 3339). */
  at: string
}

export interface ScaleDown {
  saved: SavedScale
  /** An earlier dev that never restored left its saved scale: it is kept (the workload is at 0 because of it). */
  earlier: boolean
  /** HorizontalPodAutoscalers that target the workload: they pause while it is at zero, and resume when it is restored. */
  autoscalers: string[]
}

/** restored: scaled back to the saved replicas; nothing: none was saved; kept: someone scaled it while dev ran, and their scale stays. */
export type RestoreResult = RestoreOutcome

const MergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch)

/** The saved scale in a workload's annotations, if any (a value that does not parse is none). */
export function parseSavedScale(annotations: Record<string, string> | undefined): SavedScale | undefined {
  const text = annotations?.[DevReplacedAnnotation]
  if (!text) return undefined
  try {
    const v = JSON.parse(text) as Partial<SavedScale>
    if (typeof v.replicas !== 'number' || !Number.isInteger(v.replicas) || v.replicas < 0) return undefined
    return {replicas: v.replicas, pod: String(v.pod ?? ''), at: String(v.at ?? '')}
  } catch {
    return undefined
  }
}

/** Only Deployments and StatefulSets have a scale to replace. */
export function assertScalable(ref: WorkloadRef): void {
  if (ref.kind !== 'deployment' && ref.kind !== 'statefulset') {
    throw new UserError(`--replace and --restore scale a Deployment or a StatefulSet to zero and back; ${workloadText(ref)} has no replicas to scale`)
  }
}

/** The scale subresource and the annotations of a Deployment or StatefulSet, by merge patch. */
function scalable(session: KubeSession, namespace: string, ref: WorkloadRef) {
  assertScalable(ref)
  const apps = new session.lib.AppsV1Api(session.config)
  const name = ref.name
  return ref.kind === 'deployment'
    ? {
        patchScale: (replicas: number) => apps.patchNamespacedDeploymentScale({name, namespace, body: {spec: {replicas}}}, MergePatch),
        patch: (body: object) => apps.patchNamespacedDeployment({name, namespace, body}, MergePatch),
      }
    : {
        patchScale: (replicas: number) => apps.patchNamespacedStatefulSetScale({name, namespace, body: {spec: {replicas}}}, MergePatch),
        patch: (body: object) => apps.patchNamespacedStatefulSet({name, namespace, body}, MergePatch),
      }
}

/**
 * Saves the replicas (unless an earlier dev's are there: then the workload is
 * already at zero for it, and that scale is the one to restore), then scales
 * to zero. The save names the resourceVersion it read: a scale changed in
 * between fails it instead of saving a stale number.
 */
export async function scaleToZero(session: KubeSession, namespace: string, ref: WorkloadRef, pod: string, now = new Date()): Promise<ScaleDown> {
  const api = scalable(session, namespace, ref)
  const workload = await readWorkload(session, namespace, ref)
  const earlier = parseSavedScale(workload.annotations)
  const saved = earlier ?? {replicas: workload.replicas ?? 1, pod, at: now.toISOString()}
  if (!earlier) {
    const resourceVersion = workload.resourceVersion
    await api.patch({metadata: {resourceVersion, annotations: {[DevReplacedAnnotation]: JSON.stringify(saved)}}})
  }
  await api.patchScale(0)
  return {saved, earlier: earlier !== undefined, autoscalers: await autoscalersOf(session, namespace, ref)}
}

/** Scales back to the saved replicas (if it is still at zero) and drops the saved scale. */
export async function restoreScale(session: KubeSession, namespace: string, ref: WorkloadRef): Promise<RestoreResult> {
  const api = scalable(session, namespace, ref)
  const workload = await readWorkload(session, namespace, ref)
  const saved = parseSavedScale(workload.annotations)
  if (!saved) {
    // A value that does not parse is dropped too: nothing could ever restore from it.
    if (workload.annotations[DevReplacedAnnotation] !== undefined) await api.patch({metadata: {annotations: {[DevReplacedAnnotation]: null}}})
    return {kind: 'nothing'}
  }
  const current = workload.replicas ?? 0
  if (current === 0) await api.patchScale(saved.replicas)
  await api.patch({metadata: {annotations: {[DevReplacedAnnotation]: null}}})
  return current === 0 ? {kind: 'restored', replicas: saved.replicas} : {kind: 'kept', replicas: current, saved: saved.replicas}
}

/** The HorizontalPodAutoscalers of the namespace whose scaleTargetRef is the workload. */
async function autoscalersOf(session: KubeSession, namespace: string, ref: WorkloadRef): Promise<string[]> {
  const kind = ref.kind === 'deployment' ? 'Deployment' : 'StatefulSet'
  try {
    const list = await new session.lib.AutoscalingV2Api(session.config).listNamespacedHorizontalPodAutoscaler({namespace})
    return list.items.filter((h) => h.spec?.scaleTargetRef?.kind === kind && h.spec.scaleTargetRef.name === ref.name).map((h) => h.metadata!.name!)
  } catch {
    // Without autoscaling/v2 (or the right to list it) there is nothing to say about autoscalers.
    return []
  }
}
