import {allContainers} from '../../common/pods.js'
import type {V1ConfigMap, V1EnvFromSource, V1EnvVar, V1Pod, V1Secret} from '@kubernetes/client-node'
import {VirtualKubeletEventReason as R} from '../kube/event-reasons.js'
import type {ObjectKind, ObjectLookup} from '../kube/object-manager.js'

/**
 * The events virtual-kubelet's PodController records while it resolves a
 * pod's environment before handing the pod to its provider
 * (podutils.PopulateEnvironmentVariables, node/pod.go createOrUpdatePod):
 * init containers, then containers; per container envFrom, then env; it
 * stops at the first mandatory reference it cannot satisfy, as virtual-kubelet
 * returns that error. Only the events: the pod itself follows the kubelet's
 * rules (CreateContainerConfigError and its Failed event), so these come in
 * addition to the kubelet's events, never instead.
 */
export interface VirtualKubeletEvent {
  type: 'Warning'
  reason: string
  message: string
}

class Mandatory extends Error {}

type Lookup = {kind: ObjectKind; name: string}
type Read = {keys: Set<string>} | {missing: true} | {unreadable: true}

const words = (kind: ObjectKind) =>
  kind === 'ConfigMap'
    ? {
        what: 'configmap',
        notFound: [R.OptionalConfigMapNotFound, R.MandatoryConfigMapNotFound],
        unreadable: [R.FailedToReadOptionalConfigMap, R.FailedToReadMandatoryConfigMap],
        key: [R.OptionalConfigMapKeyNotFound, R.MandatoryConfigMapKeyNotFound],
      }
    : {
        what: 'secret',
        notFound: [R.OptionalSecretNotFound, R.MandatorySecretNotFound],
        unreadable: [R.FailedToReadOptionalSecret, R.FailedToReadMandatorySecret],
        key: [R.OptionalSecretKeyNotFound, R.MandatorySecretKeyNotFound],
      }

async function read(objects: ObjectLookup, namespace: string, ref: Lookup): Promise<Read> {
  try {
    const o = await objects.get(ref.kind, namespace, ref.name)
    if (!o) return {missing: true}
    // Only the keys matter here; the values are the runtime's business.
    const keys =
      ref.kind === 'ConfigMap'
        ? [...Object.keys((o as V1ConfigMap).data ?? {}), ...Object.keys((o as V1ConfigMap).binaryData ?? {})]
        : [...Object.keys((o as V1Secret).data ?? {}), ...Object.keys((o as V1Secret).stringData ?? {})]
    return {keys: new Set(keys)}
  } catch {
    return {unreadable: true}
  }
}

async function envFromEvents(objects: ObjectLookup, namespace: string, source: V1EnvFromSource, out: VirtualKubeletEvent[]): Promise<void> {
  const ref = source.configMapRef ? {kind: 'ConfigMap' as const, ...source.configMapRef} : source.secretRef ? {kind: 'Secret' as const, ...source.secretRef} : undefined
  if (!ref?.name) return
  const w = words(ref.kind)
  const optional = ref.optional === true
  const r = await read(objects, namespace, {kind: ref.kind, name: ref.name})
  if ('keys' in r) return
  const reasons = 'missing' in r ? w.notFound : w.unreadable
  const message = 'missing' in r ? `${w.what} "${ref.name}" not found` : `failed to read ${w.what} "${ref.name}"`
  out.push({type: 'Warning', reason: reasons[optional ? 0 : 1], message})
  if (!optional) throw new Mandatory(message)
}

async function envEvents(objects: ObjectLookup, namespace: string, env: V1EnvVar, out: VirtualKubeletEvent[]): Promise<void> {
  const from = env.valueFrom
  const ref = from?.configMapKeyRef ? {kind: 'ConfigMap' as const, ...from.configMapKeyRef} : from?.secretKeyRef ? {kind: 'Secret' as const, ...from.secretKeyRef} : undefined
  if (!ref?.name) return
  const w = words(ref.kind)
  const optional = ref.optional === true
  const r = await read(objects, namespace, {kind: ref.kind, name: ref.name})
  let reason: string
  let message: string
  if ('keys' in r) {
    if (r.keys.has(ref.key)) return
    reason = w.key[optional ? 0 : 1]
    message = optional ? `skipping optional envvar "${env.name}": key "${ref.key}" does not exist in ${w.what} "${ref.name}"` : `key "${ref.key}" does not exist in ${w.what} "${ref.name}"`
  } else if ('missing' in r) {
    reason = w.notFound[optional ? 0 : 1]
    message = optional ? `skipping optional envvar "${env.name}": ${w.what} "${ref.name}" not found` : `${w.what} "${ref.name}" not found`
  } else {
    reason = w.unreadable[optional ? 0 : 1]
    message = optional ? `skipping optional envvar "${env.name}": failed to read ${w.what} "${ref.name}"` : `failed to read ${w.what} "${ref.name}"`
  }
  out.push({type: 'Warning', reason, message})
  if (!optional) throw new Mandatory(message)
}

/** virtual-kubelet's environment events for a pod, in the order it records them. */
export async function virtualKubeletEnvEvents(pod: V1Pod, objects: ObjectLookup): Promise<VirtualKubeletEvent[]> {
  const namespace = pod.metadata?.namespace ?? 'default'
  const out: VirtualKubeletEvent[] = []
  try {
    for (const c of allContainers(pod)) {
      for (const source of c.envFrom ?? []) await envFromEvents(objects, namespace, source, out)
      for (const env of c.env ?? []) await envEvents(objects, namespace, env, out)
    }
  } catch (error) {
    if (!(error instanceof Mandatory)) throw error
  }
  return out
}
