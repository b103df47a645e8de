import type {V1ConfigMap, V1Secret} from '@kubernetes/client-node'
import {describeApiError} from '../../kube/errors.js'
import type {ObjectKind, ObjectLookup} from '../../kube/object-manager.js'

/**
 * The rules for a ConfigMap or Secret a pod refers to, in one place for env
 * building and volume materialisation: a missing object or key is skipped
 * when the reference is optional and stops the container (env:
 * CreateContainerConfigError) or the mount (FailedMount) when it is not.
 * Only the messages differ, as the kubelet's do. Nothing is recorded here: a
 * mandatory miss is the container's Failed event (or the volume's FailedMount),
 * an optional one is silent, as on the kubelet.
 */

/** A mandatory reference that cannot be satisfied; the message is the kubelet's. */
export class MissingReference extends Error {}

/** Who is asking: the messages for a missing key differ between env and volumes. */
export type ReferenceUse = 'env' | 'volume'

export interface SourceRef {
  kind: ObjectKind
  namespace: string
  name: string
  optional: boolean
}

const lower = (kind: ObjectKind) => (kind === 'ConfigMap' ? 'configmap' : 'secret')

export function configMapData(cm: V1ConfigMap): Record<string, string> {
  const out: Record<string, string> = {...cm.data}
  for (const [k, v] of Object.entries(cm.binaryData ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8')
  return out
}

export function secretData(s: V1Secret): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8')
  for (const [k, v] of Object.entries(s.stringData ?? {})) out[k] = v
  return out
}

export function notFoundMessage(ref: {kind: ObjectKind; name: string}): string {
  return `${lower(ref.kind)} "${ref.name}" not found`
}

/**
 * The data of the referenced object; undefined when it does not exist and
 * the reference is optional. A mandatory one that does not exist, or an
 * object that cannot be read, throws MissingReference.
 */
export async function referencedData(objects: ObjectLookup, ref: SourceRef): Promise<Record<string, string> | undefined> {
  let o: V1ConfigMap | V1Secret | null
  try {
    o = await objects.get(ref.kind, ref.namespace, ref.name)
  } catch (error) {
    throw new MissingReference(describeApiError(error))
  }
  if (o) return ref.kind === 'ConfigMap' ? configMapData(o as V1ConfigMap) : secretData(o as V1Secret)
  if (ref.optional) return undefined
  throw new MissingReference(notFoundMessage(ref))
}

/** One key of the object's data; undefined when it is missing and the reference optional, MissingReference when mandatory. */
export function referencedKey(data: Record<string, string>, ref: SourceRef, key: string, use: ReferenceUse): string | undefined {
  if (Object.hasOwn(data, key)) return data[key]
  if (ref.optional) return undefined
  if (use === 'env') throw new MissingReference(`couldn't find key ${key} in ${ref.kind} ${ref.namespace}/${ref.name}`)
  throw new MissingReference(`${lower(ref.kind)} references non-existent ${ref.kind === 'ConfigMap' ? 'config' : 'secret'} key: ${key}`)
}
