import type {CoreV1Api, V1PersistentVolume, V1PersistentVolumeClaim, V1Pod, V1Volume} from '@kubernetes/client-node'
import {stat} from 'node:fs/promises'
import {describeApiError} from '../../kube/errors.js'

/** The PersistentVolume types vnode mounts: those that are a directory of this machine. */
export const SupportedPersistentVolumeTypes = ['hostPath', 'local']

export type ClaimResult = {ok: true; path: string; readOnly: boolean} | {ok: false; message: string}

/**
 * A persistentVolumeClaim volume, as the kubelet's volume manager resolves
 * it: the claim must be Bound, its PV must point back at it, and the PV is
 * mounted by its own type. hostPath and local PVs are directories of this
 * machine, used where they are; every other type fails the mount with a
 * message naming it. The mount is read-only when the pod's volume says
 * readOnly, or when ReadOnlyMany is the only access mode of the claim or PV.
 */
export async function claimVolume(pod: V1Pod, v: V1Volume, core: CoreV1Api, checkHostPath: (path: string, type: string) => Promise<string>): Promise<ClaimResult> {
  const source = v.persistentVolumeClaim!
  const namespace = pod.metadata!.namespace!
  const processing = (why: string): ClaimResult => ({
    ok: false,
    message: `Unable to attach or mount volumes: unmounted volumes=[${v.name}]: error processing PVC ${namespace}/${source.claimName}: ${why}`,
  })
  let pvc: V1PersistentVolumeClaim
  try {
    pvc = await core.readNamespacedPersistentVolumeClaim({name: source.claimName, namespace})
  } catch (error) {
    return processing(`failed to fetch PVC from API server: ${describeApiError(error)}`)
  }
  if (pvc.metadata?.deletionTimestamp && !(pvc.metadata.finalizers ?? []).includes('kubernetes.io/pvc-protection')) return processing('PVC is being deleted')
  if (pvc.status?.phase !== 'Bound') return processing('PVC is not bound')
  const pvName = pvc.spec?.volumeName
  if (!pvName) return processing('PVC has empty pvc.Spec.VolumeName')
  let pv: V1PersistentVolume
  try {
    pv = await core.readPersistentVolume({name: pvName})
  } catch (error) {
    return processing(`failed to fetch PV ${pvName} from API server: ${describeApiError(error)}`)
  }
  if (!pv.spec?.claimRef) return processing(`found PV object ${pvName} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`)
  if (pv.spec.claimRef.uid !== pvc.metadata?.uid) {
    return processing(`found PV object ${pvName} but its pv.Spec.ClaimRef.UID ${pv.spec.claimRef.uid} does not point to claim.UID ${pvc.metadata?.uid}`)
  }
  if ((pv.spec.volumeMode ?? 'Filesystem') !== 'Filesystem') return processing(`volume ${v.name} has volumeMode ${pv.spec.volumeMode}, but is specified in volumeMounts`)
  const setUp = (why: string): ClaimResult => ({ok: false, message: `MountVolume.SetUp failed for volume "${pvName}" : ${why}`})
  const readOnly = source.readOnly === true || onlyReadOnlyMany(pvc.spec?.accessModes) || onlyReadOnlyMany(pv.spec.accessModes)
  try {
    if (pv.spec.hostPath) return {ok: true, path: await checkHostPath(pv.spec.hostPath.path, pv.spec.hostPath.type ?? ''), readOnly}
    if (pv.spec.local) {
      const st = await stat(pv.spec.local.path).catch(() => undefined)
      if (!st) return {ok: false, message: `MountVolume.NewMounter initialization failed for volume "${pvName}" : path "${pv.spec.local.path}" does not exist`}
      if (!st.isDirectory()) return setUp(`local volume path "${pv.spec.local.path}" is not a directory (block local volumes are not supported by vnode)`)
      return {ok: true, path: pv.spec.local.path, readOnly}
    }
  } catch (error) {
    return setUp((error as Error).message)
  }
  return setUp(`PersistentVolume "${pvName}" has type ${persistentVolumeType(pv)}, which vnode cannot mount (supported: ${SupportedPersistentVolumeTypes.join(', ')})`)
}

function onlyReadOnlyMany(modes: string[] | undefined): boolean {
  return (modes ?? []).length > 0 && modes!.every((m) => m === 'ReadOnlyMany')
}

/** The PV's source field (nfs, csi, iscsi, ...): what the user wrote. */
export function persistentVolumeType(pv: V1PersistentVolume): string {
  const notTypes = new Set(['accessModes', 'capacity', 'claimRef', 'mountOptions', 'nodeAffinity', 'persistentVolumeReclaimPolicy', 'storageClassName', 'volumeMode', 'volumeAttributesClassName'])
  return Object.keys(pv.spec ?? {}).find((k) => !notTypes.has(k) && (pv.spec as Record<string, unknown>)[k] != null) ?? 'unknown'
}
