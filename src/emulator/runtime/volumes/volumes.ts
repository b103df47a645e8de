import {allContainers} from '../../../common/pods.js'
import type {CoreV1Api, V1Container, V1KeyToPath, V1Pod, V1Volume, V1VolumeMount, V1VolumeProjection} from '@kubernetes/client-node'
import {constants} from 'node:fs'
import {access, chmod, lstat, mkdir, readlink, realpath, rm, stat, symlink, writeFile} from 'node:fs/promises'
import {applyFsGroup} from './ownership.js'
import {dirname, isAbsolute, join, sep} from 'node:path'
import {describeApiError} from '../../kube/errors.js'
import type {ObjectLookup} from '../../kube/object-manager.js'
import {PayloadError, writeAtomic} from './atomic-writer.js'
import {removeTree} from '../../../common/remove-tree.js'
import {podFieldValue, resourceFieldValue, type NodeFacts} from '../env/env.js'
import {expand, mappingFor} from '../env/expansion.js'
import {MissingReference, referencedData, referencedKey, type SourceRef} from '../env/references.js'
import type {TokenSource} from './tokens.js'
import {pinSubPath, subPathPinDir} from './subpath-pin.js'
import {claimVolume} from './persistent-volumes.js'

/**
 * How a container finds its volumes. A process cannot see a mount at an
 * arbitrary absolute path without root, so:
 *
 *  - every volume is materialised under the pod sandbox:
 *      <stateDir>/pods/<uid>/volumes/<volume>/
 *    (hostPath volumes stay where they are);
 *  - each container gets a root, exported as $VNODE_VOLUME_ROOT, whose
 *    subtree mirrors the container's mounts: a volumeMount at /etc/app is
 *    the symlink $VNODE_VOLUME_ROOT/etc/app -> the volume (or its subPath).
 *    Specs can say `$(VNODE_VOLUME_ROOT)/etc/app` in command, args and env;
 *    the root is also the container's default working directory, so the
 *    relative path `etc/app` works too;
 *  - when the user may create the mountPath itself (its parent directory
 *    exists and is writable, and nothing is at that path), a real symlink is
 *    made there as well, and removed with the pod. Nothing existing is ever
 *    replaced.
 *
 * ConfigMap, Secret, downwardAPI and projected volumes are read-only, as in
 * Kubernetes; an emptyDir is made read-only when every mount of it says
 * readOnly. Secret contents are 0600 files in 0700 directories.
 */
export const VolumeRootEnv = 'VNODE_VOLUME_ROOT'

export interface VolumeDeps {
  node: NodeFacts
  /** The ConfigMaps and Secrets the pod references, from the node's watches. */
  objects: ObjectLookup
  tokens: TokenSource
  /** For the PersistentVolumeClaims and PersistentVolumes a pod's claims name. */
  core: CoreV1Api
  /** In a pod sandbox: an emptyDir is 0777 as the kubelet makes it (its parents stay owner-only on the host), for containers that run as another user. */
  sandboxed?: boolean
}

export interface MaterialisedVolume {
  name: string
  /** Where the volume's content is on this machine. */
  path: string
  /** Mounted read-only whatever the volumeMount says (a PVC volume's readOnly, a ReadOnlyMany PV). */
  readOnly?: boolean
}

export type VolumeResult = {ok: true; volumes: Map<string, MaterialisedVolume>} | {ok: false; message: string}

export function volumesDir(sandbox: string): string {
  return join(sandbox, 'volumes')
}

export function containerRoot(sandbox: string, container: string): string {
  return join(sandbox, 'roots', container)
}

/** A relative path that stays inside its directory: no absolute path, no `..` element. */
export function checkRelativePath(p: string, what: string): string | undefined {
  if (!p) return `${what}: must not be empty`
  if (isAbsolute(p)) return `${what} "${p}": must be a relative path`
  if (p.split(/[\\/]/).includes('..')) return `${what} "${p}": must not contain '..'`
  return undefined
}

class MountError extends Error {}

/** Materialises every volume of the pod; idempotent (emptyDir content survives). */
export async function materialiseVolumes(pod: V1Pod, sandbox: string, deps: VolumeDeps): Promise<VolumeResult> {
  const out = new Map<string, MaterialisedVolume>()
  await mkdir(volumesDir(sandbox), {recursive: true, mode: 0o700})
  for (const v of pod.spec?.volumes ?? []) {
    if (v.persistentVolumeClaim) {
      const r = await claimVolume(pod, v, deps.core, hostPath)
      if (!r.ok) return r
      out.set(v.name, {name: v.name, path: r.path, readOnly: r.readOnly})
      continue
    }
    try {
      out.set(v.name, {name: v.name, path: await materialise(pod, v, sandbox, deps)})
    } catch (error) {
      return {ok: false, message: setUpFailed(v.name, error)}
    }
  }
  return {ok: true, volumes: out}
}

function setUpFailed(volume: string, error: unknown): string {
  const known = error instanceof MountError || error instanceof MissingReference || error instanceof PayloadError
  return `MountVolume.SetUp failed for volume "${volume}" : ${known ? (error as Error).message : describeApiError(error)}`
}

/** Volumes whose content comes from the API and the pod (the kubelet's atomic-writer volumes): rewritten when their source changes. */
export function isRefreshable(v: V1Volume): boolean {
  return !!(v.configMap || v.secret || v.downwardAPI || v.projected)
}

/**
 * Rewrites the pod's ConfigMap, Secret, downwardAPI and projected volumes
 * from their sources now (atomically; nothing is written when nothing
 * changed). A volume that cannot be set up keeps its last content; each
 * failure is returned as the FailedMount message the kubelet gives.
 */
export async function refreshVolumes(pod: V1Pod, sandbox: string, deps: VolumeDeps): Promise<string[]> {
  const failures: string[] = []
  for (const v of pod.spec?.volumes ?? []) {
    if (!isRefreshable(v)) continue
    try {
      await materialise(pod, v, sandbox, deps)
    } catch (error) {
      failures.push(setUpFailed(v.name, error))
    }
  }
  return failures
}

async function materialise(pod: V1Pod, v: V1Volume, sandbox: string, deps: VolumeDeps): Promise<string> {
  const bad = checkRelativePath(v.name, 'volume name')
  if (bad || v.name.includes('/')) throw new MountError(bad ?? `volume name "${v.name}" must not contain '/'`)
  const dir = join(volumesDir(sandbox), v.name)
  if (v.hostPath) return hostPath(v.hostPath.path, v.hostPath.type ?? '')
  if (v.emptyDir) {
    await mkdir(dir, {recursive: true, mode: 0o700})
    const mounts = allMounts(pod).filter((m) => m.name === v.name)
    await chmod(dir, mounts.length > 0 && mounts.every((m) => m.readOnly) ? 0o555 : deps.sandboxed ? 0o777 : 0o700)
    await applyFsGroup(pod, v, dir)
    return dir
  }
  const files = await projectedFiles(pod, v, deps)
  if (!files) throw new MountError(`volume type ${volumeType(v)} not supported by vnode (supported: emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim)`)
  // Secret content is the owner's only: a mode's group and other bits are dropped.
  await writeAtomic(
    dir,
    files.files.map((f) => ({...f, mode: (files.secret ? f.mode & 0o700 : f.mode) & 0o777})),
    {private: files.secret},
  )
  await applyFsGroup(pod, v, dir)
  return dir
}

interface VolumeFile {
  path: string
  content: string
  mode: number
}

async function projectedFiles(pod: V1Pod, v: V1Volume, deps: VolumeDeps): Promise<{files: VolumeFile[]; secret: boolean} | undefined> {
  if (v.configMap) return {files: await configMapFiles(pod, v.configMap, v.configMap.defaultMode ?? 0o644, deps), secret: false}
  if (v.secret) return {files: await secretFiles(pod, v.secret, v.secret.defaultMode ?? 0o644, deps), secret: true}
  if (v.downwardAPI) return {files: downwardFiles(pod, v.downwardAPI.items ?? [], v.downwardAPI.defaultMode ?? 0o644, deps), secret: false}
  if (v.projected) {
    const mode = v.projected.defaultMode ?? 0o644
    const files: VolumeFile[] = []
    let secret = false
    for (const s of v.projected.sources ?? []) {
      files.push(...(await projectionFiles(pod, s, mode, deps)))
      if (s.secret || s.serviceAccountToken) secret = true
    }
    return {files, secret}
  }
  return undefined
}

async function projectionFiles(pod: V1Pod, s: V1VolumeProjection, mode: number, deps: VolumeDeps): Promise<VolumeFile[]> {
  if (s.configMap) return configMapFiles(pod, s.configMap, mode, deps)
  if (s.secret) return secretFiles(pod, {...s.secret, secretName: s.secret.name}, mode, deps)
  if (s.downwardAPI) return downwardFiles(pod, s.downwardAPI.items ?? [], mode, deps)
  if (s.serviceAccountToken) {
    const bad = checkRelativePath(s.serviceAccountToken.path, 'serviceAccountToken path')
    if (bad) throw new MountError(bad)
    const token = await deps.tokens.token(pod, {audience: s.serviceAccountToken.audience, expirationSeconds: s.serviceAccountToken.expirationSeconds})
    return [{path: s.serviceAccountToken.path, content: token, mode}]
  }
  if (s.clusterTrustBundle) throw new MountError('clusterTrustBundle projections are not supported by vnode')
  return []
}

async function configMapFiles(pod: V1Pod, ref: {name?: string; items?: V1KeyToPath[]; optional?: boolean}, mode: number, deps: VolumeDeps): Promise<VolumeFile[]> {
  const source: SourceRef = {kind: 'ConfigMap', namespace: pod.metadata!.namespace!, name: ref.name ?? '', optional: ref.optional ?? false}
  const data = await referencedData(deps.objects, source)
  if (!data) return []
  return keyFiles(data, ref.items, mode, source)
}

async function secretFiles(pod: V1Pod, ref: {secretName?: string; items?: V1KeyToPath[]; optional?: boolean}, mode: number, deps: VolumeDeps): Promise<VolumeFile[]> {
  const source: SourceRef = {kind: 'Secret', namespace: pod.metadata!.namespace!, name: ref.secretName ?? '', optional: ref.optional ?? false}
  const data = await referencedData(deps.objects, source)
  if (!data) return []
  return keyFiles(data, ref.items, mode, source)
}

function keyFiles(data: Record<string, string>, items: V1KeyToPath[] | undefined, mode: number, source: SourceRef): VolumeFile[] {
  const kind = source.kind === 'ConfigMap' ? 'configmap' : 'secret'
  if (!items || items.length === 0) {
    return Object.entries(data).map(([key, content]) => {
      if (key.includes('/') || key === '..' || key === '.') throw new MountError(`${kind} key "${key}": not a valid file name`)
      return {path: key, content, mode}
    })
  }
  const out: VolumeFile[] = []
  for (const item of items) {
    const bad = checkRelativePath(item.path, 'item path')
    if (bad) throw new MountError(bad)
    const content = referencedKey(data, source, item.key, 'volume')
    if (content === undefined) continue
    out.push({path: item.path, content, mode: item.mode ?? mode})
  }
  return out
}

function downwardFiles(pod: V1Pod, items: NonNullable<NonNullable<V1Volume['downwardAPI']>['items']>, mode: number, deps: VolumeDeps): VolumeFile[] {
  return items.map((item) => {
    const bad = checkRelativePath(item.path, 'downwardAPI path')
    if (bad) throw new MountError(bad)
    let content: string | undefined
    if (item.fieldRef) {
      content = podFieldValue(pod, item.fieldRef.fieldPath, deps.node)
      if (content === undefined) throw new MountError(`unsupported fieldPath "${item.fieldRef.fieldPath}"`)
    } else if (item.resourceFieldRef) {
      const r = item.resourceFieldRef
      const c = allContainers(pod).find((x) => x.name === r.containerName)
      if (!c) throw new MountError(`resourceFieldRef: container "${r.containerName}" not found`)
      content = resourceFieldValue(c, r.resource, r.divisor, deps.node)
      if (content === undefined) throw new MountError(`unsupported resource "${r.resource}"`)
    }
    return {path: item.path, content: content ?? '', mode: item.mode ?? mode}
  })
}

/** The volume's source field (ephemeral, csi, nfs, ...). */
function volumeType(v: V1Volume): string {
  return Object.keys(v).find((k) => k !== 'name' && (v as unknown as Record<string, unknown>)[k] != null) ?? 'unknown'
}

async function hostPath(path: string, type: string): Promise<string> {
  if (!isAbsolute(path)) throw new MountError(`hostPath "${path}" must be absolute`)
  const st = await stat(path).catch(() => undefined)
  const fail = (what: string) => {
    throw new MountError(`hostPath type check failed: ${path} is not a ${what}`)
  }
  switch (type) {
    case 'DirectoryOrCreate':
      if (!st) await mkdir(path, {recursive: true, mode: 0o755})
      else if (!st.isDirectory()) fail('directory')
      break
    case 'Directory':
      if (!st?.isDirectory()) fail('directory')
      break
    case 'FileOrCreate':
      if (!st) {
        await mkdir(dirname(path), {recursive: true})
        await writeFile(path, '', {mode: 0o644, flag: 'a'})
      } else if (!st.isFile()) fail('file')
      break
    case 'File':
      if (!st?.isFile()) fail('file')
      break
    case 'Socket':
      if (!st?.isSocket()) fail('socket')
      break
    case 'CharDevice':
      if (!st?.isCharacterDevice()) fail('character device')
      break
    case 'BlockDevice':
      if (!st?.isBlockDevice()) fail('block device')
      break
    default:
      // No type: no check, and a path that does not exist is made a directory (0755), as the runtime under a kubelet
      // does with a bind mount's missing source (containerd's CRI, for Docker's sake).
      if (!st) {
        await mkdir(path, {recursive: true, mode: 0o755}).catch((e: Error) => {
          throw new MountError(`failed to mkdir ${JSON.stringify(path)}: ${e.message}`)
        })
      }
      break
  }
  return path
}

export interface RealLink {
  path: string
  target: string
}

export type RootResult = {ok: true; root: string; links: RealLink[]} | {ok: false; message: string}

/**
 * Builds the container's $VNODE_VOLUME_ROOT: each mountPath mirrored as a
 * symlink to its volume (or subPath), plus a real symlink at the mountPath
 * when the user can make one. Returns the real symlinks made, to remove later.
 */
export async function prepareContainerRoot(container: V1Container, sandbox: string, volumes: Map<string, MaterialisedVolume>, env: Record<string, string>): Promise<RootResult> {
  const root = containerRoot(sandbox, container.name)
  await mkdir(root, {recursive: true, mode: 0o700})
  const links: RealLink[] = []
  const mounts = [...(container.volumeMounts ?? [])].sort((a, b) => a.mountPath.length - b.mountPath.length)
  for (const m of mounts) {
    const src = await mountSource(m, volumes, env)
    if (!src.ok) return src
    // A subPath keeps what it was when the container started, as the kubelet's bind mount does.
    const volumePath = volumes.get(m.name)!.path
    const target = src.source === volumePath ? src.source : await pinSubPath(volumePath, src.source, subPathPinDir(volumesDir(sandbox), container.name, m.mountPath))
    const mirror = join(root, m.mountPath)
    await mkdir(dirname(mirror), {recursive: true, mode: 0o700})
    await replaceLink(mirror, target)
    if (await makeRealLink(m.mountPath, target)) links.push({path: m.mountPath, target})
  }
  return {ok: true, root, links}
}

/** source: the path as the spec names it; real: where it resolves (what a bind mount takes). */
export type MountSourceResult = {ok: true; source: string; real: string} | {ok: false; message: string}

/**
 * Where a volumeMount's content is on this machine: its volume, or the
 * subPath (subPathExpr expanded) inside it, made when missing, refused when
 * it escapes the volume (`..`, an absolute path, a symlink pointing out).
 */
export async function mountSource(m: V1VolumeMount, volumes: Map<string, MaterialisedVolume>, env: Record<string, string>): Promise<MountSourceResult> {
  const vol = volumes.get(m.name)
  if (!vol) return {ok: false, message: `volumeMount "${m.name}": no volume of that name in the pod`}
  if (!isAbsolute(m.mountPath) || m.mountPath.split('/').includes('..')) return {ok: false, message: `volumeMount "${m.name}": mountPath "${m.mountPath}" must be absolute without '..'`}
  const sub = m.subPathExpr ? expand(m.subPathExpr, mappingFor(env)) : m.subPath
  if (!sub) return {ok: true, source: vol.path, real: vol.path}
  const bad = checkRelativePath(sub, m.subPathExpr ? 'subPathExpr' : 'subPath')
  if (bad) return {ok: false, message: `volumeMount "${m.name}": ${bad}`}
  const target = join(vol.path, sub)
  if (!(await lstat(target).catch(() => undefined))) await mkdir(target, {recursive: true, mode: 0o700}).catch(() => undefined)
  // A symlink inside the volume could point anywhere: the subPath must resolve inside it.
  const real = await realpath(target).catch(() => target)
  const base = await realpath(vol.path).catch(() => vol.path)
  if (real !== base && !real.startsWith(base + sep)) return {ok: false, message: `volumeMount "${m.name}": subPath "${sub}" resolves outside the volume`}
  return {ok: true, source: target, real}
}

async function replaceLink(path: string, target: string): Promise<void> {
  const st = await lstat(path).catch(() => undefined)
  if (st?.isSymbolicLink()) {
    if ((await readlink(path)) === target) return
    await rm(path)
  } else if (st) {
    await removeTree(path)
  }
  await symlink(target, path)
}

/** A symlink at the real mountPath, only where nothing is and the user may write. */
async function makeRealLink(mountPath: string, target: string): Promise<boolean> {
  const st = await lstat(mountPath).catch(() => undefined)
  if (st) return st.isSymbolicLink() && (await readlink(mountPath)) === target
  try {
    await access(dirname(mountPath), constants.W_OK)
    await symlink(target, mountPath)
    return true
  } catch {
    return false
  }
}

/** Removes the real mountPath symlinks this pod made, if they still point where we made them. */
export async function removeRealLinks(links: RealLink[]): Promise<void> {
  for (const l of links) {
    const st = await lstat(l.path).catch(() => undefined)
    if (!st?.isSymbolicLink()) continue
    const target = await readlink(l.path).catch(() => '')
    if (target === l.target) await rm(l.path, {force: true})
  }
}

function allMounts(pod: V1Pod) {
  return allContainers(pod).flatMap((c) => c.volumeMounts ?? [])
}
