import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {registeredStateDirs} from '../../../common/state-dirs.js'
import {mountSource, type MaterialisedVolume} from '../volumes/volumes.js'
import {prepareRootLayer, RootLayerError} from './root-layer.js'

/** What a container instance's layer holds of its writes (eviction counts it). */
export {layerWrittenDirs} from './root-layer.js'
import type {ContainerSandboxSpec, SandboxBind, SandboxWalls} from './spec.js'

/** The per-pod files every container of the pod sees (pod-files.ts writes them). */
export interface PodFilePaths {
  hosts: string
  resolvConf: string
  hostname: string
}

export interface ContainerViewInput {
  pod: V1Pod
  container: V1Container
  volumes: Map<string, MaterialisedVolume>
  env: Record<string, string>
  podFiles: PodFilePaths
  /** The host file behind the container's terminationMessagePath. */
  terminationFile: string
  terminationMessagePath: string
  hostname: string
  /** vnode's state dir: hidden, so no pod sees another's volumes or any log. */
  stateDir: string
  /** The node's walls: the writable layer's mode, the hidden paths. */
  walls?: SandboxWalls
  /** Where this instance's writable layer is made (the previous instance's is discarded). */
  layerDir: string
}

export type ContainerViewResult = {ok: true; spec: ContainerSandboxSpec} | {ok: false; message: string}

/**
 * The container's sandbox: each volumeMount at its mountPath (subPath and
 * subPathExpr resolved inside the volume), read-only where asked and for
 * the API-data volumes (configMap, secret, downwardAPI, projected), which
 * the kubelet always mounts read-only; the pod's /etc files; the
 * termination message file. Mounts of the container's own choosing come
 * after the kubelet's files, so a volume at /etc/hosts wins, as in a pod.
 */
/**
 * The host paths hidden from the node's containers now: its state dir, the walls' list, and the state dirs of nodes
 * started after this one too (the registry, read at each call): a pod of such a node in plain mode may leave a real
 * symlink at a mountPath on the host (volumes.ts), which a view would otherwise follow into that node's pod
 * directories, owner-only on the host.
 */
export function hiddenFromContainers(stateDir: string, walls: SandboxWalls | undefined): string[] {
  return [...new Set([stateDir, ...(walls?.hide ?? []), ...registeredStateDirs()])]
}

export async function containerView(input: ContainerViewInput): Promise<ContainerViewResult> {
  const binds: SandboxBind[] = [
    {source: input.podFiles.hosts, target: '/etc/hosts', readOnly: false},
    {source: input.podFiles.resolvConf, target: '/etc/resolv.conf', readOnly: false},
    {source: input.podFiles.hostname, target: '/etc/hostname', readOnly: false},
    {source: input.terminationFile, target: input.terminationMessagePath, readOnly: false},
  ]
  const apiData = new Set((input.pod.spec?.volumes ?? []).filter((v) => v.configMap || v.secret || v.downwardAPI || v.projected).map((v) => v.name))
  for (const m of input.container.volumeMounts ?? []) {
    const src = await mountSource(m, input.volumes, input.env)
    if (!src.ok) return src
    binds.push({source: src.real, target: m.mountPath, readOnly: m.readOnly === true || apiData.has(m.name) || input.volumes.get(m.name)?.readOnly === true})
  }
  const hide = hiddenFromContainers(input.stateDir, input.walls)
  const spec: ContainerSandboxSpec = {hostname: input.hostname, binds, hide, ...(input.walls?.emptyFile ? {emptyFile: input.walls.emptyFile} : {})}
  if (!input.walls?.layer) return {ok: true, spec}
  try {
    spec.rootLayer = await prepareRootLayer(input.layerDir, input.walls.layer)
  } catch (error) {
    if (error instanceof RootLayerError) return {ok: false, message: `the container's writable layer cannot be made: ${error.message}`}
    throw error
  }
  // readOnlyRootFilesystem: the layer's overlays read-only in the view (bwrap.ts), so a write outside the volumes fails
  // with EROFS, and the host's files are seen through overlays as in any other container (no host socket reachable).
  if (input.container.securityContext?.readOnlyRootFilesystem === true) spec.readOnlyRoot = true
  return {ok: true, spec}
}
