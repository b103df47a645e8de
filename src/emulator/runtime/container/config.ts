import {EventReason} from '../../kube/event-reasons.js'
import type {V1Container, V1EphemeralContainer, V1Pod} from '@kubernetes/client-node'
import {isAbsolute, join, relative} from 'node:path'
import type {ProviderContext} from '../../provider/handler.js'
import type {ContainerState} from './state.js'
import {buildContainerEnv, type NodeFacts} from '../env/env.js'
import {prepareProgram} from '../images/image-program.js'
import {imagePresent, resolveProgram, type ImageMap} from '../images/image-map.js'
import {containerView} from '../sandbox/container-view.js'
import {containerHostname} from '../sandbox/pod-files.js'
import type {ContainerSandboxSpec, SandboxMode, SandboxWalls} from '../sandbox/spec.js'
import {nodeWalls, unmetWall, withFsWalls} from '../sandbox/walls.js'
import {containerSecurity, hostUserDatabase, parseImageUser} from './security-context.js'
import {prepareContainerRoot, VolumeRootEnv, type MaterialisedVolume, type RealLink} from '../volumes/volumes.js'

export const DefaultTerminationMessagePath = '/dev/termination-log'

/** Everything a container's start needs decided before its process is spawned (the kubelet's generateContainerConfig). */
export interface ContainerConfig {
  ok: true
  argv: string[]
  env: Record<string, string>
  cwd: string
  /** The container's namespaces and file view; undefined in the plain mode. */
  view?: ContainerSandboxSpec
  /** The host file behind terminationMessagePath, emptied before each start. */
  terminationFile: string
  imageID: string
  /** Plain mode: real symlinks made at mountPaths (removed with the pod). */
  links: RealLink[]
}

/** The container cannot be created on this sync: its waiting reason, message and the Failed event's text. */
export interface ContainerConfigFailure {
  ok: false
  reason: 'ErrImageNeverPull' | 'CreateContainerError' | 'CreateContainerConfigError'
  message: string
  event?: string
}

export interface ContainerConfigInput {
  pod: V1Pod
  c: ContainerState
  /** The pod's other containers: `kubectl debug --target` joins one's PID namespace. */
  containers: readonly ContainerState[]
  ctx: ProviderContext
  images: ImageMap
  node: NodeFacts
  /** Containers' default PATH. */
  path?: string
  /** The pod's sandbox directory (roots, termination files, mapped images, writable layers). */
  sandbox: string
  /** The node's walls (sandbox mode): writable layers, hidden paths. */
  walls?: SandboxWalls
  sandboxMode: SandboxMode
  volumes: Map<string, MaterialisedVolume>
  podFiles: {hosts: string; resolvConf: string; hostname: string}
  /** The pod's network namespace, when it has one. */
  netns?: string
  /** The pod's address in that namespace: what status.podIP gives its env. */
  podIP?: string
  /** shareProcessNamespace: the PID 1 of the pod's shared namespace, started on first use. */
  sharedPid: () => Promise<number>
  /** A container event (Normal Pulled, Warning ErrImageNeverPull). */
  event(type: 'Normal' | 'Warning', reason: string, message: string): void
  /** A pod event (the env's missing-reference warnings). */
  podEvent(type: 'Normal' | 'Warning', reason: string, message: string): void
}

/**
 * The image check, the program, the environment, the file view and the
 * argv of one container, in the kubelet's order: the image first (Pulled
 * on every attempt), then the config, whose failures are
 * CreateContainerConfigError or CreateContainerError.
 */
export async function containerConfig(input: ContainerConfigInput): Promise<ContainerConfig | ContainerConfigFailure> {
  const {pod, c} = input
  // EnsureImageExists comes first: an image that is not there under pull policy Never stops the start.
  if (c.spec.imagePullPolicy === 'Never' && !imagePresent(c.spec.image ?? '', input.images)) {
    const message = `Container image "${c.spec.image ?? ''}" is not present with pull policy of Never`
    input.event('Warning', EventReason.ErrImageNeverPull, message)
    return {ok: false, reason: 'ErrImageNeverPull', message, event: 'Error: ErrImageNeverPull'}
  }
  // The kubelet reports the image on every attempt, before the container's config is made.
  input.event('Normal', EventReason.PulledImage, `Container image "${c.spec.image ?? ''}" already present on machine`)
  // The user the image runs as, runAsNonRoot and the rest of securityContext: before the config is made, as the kubelet checks them.
  // With the filesystem walls `up` settled, so a refusal's message lists the walls the node's annotation does.
  const hostWalls = withFsWalls(nodeWalls(input.sandboxMode), input.walls)
  const imageUser = parseImageUser(input.images.resolve(c.spec.image ?? '')?.entry.user)
  const security = containerSecurity(pod, c.spec, {image: imageUser, uid: hostWalls.uid, gid: hostWalls.gid}, hostUserDatabase())
  if (!security.ok) return {ok: false, reason: security.reason, message: security.message}
  const unmet = unmetWall(pod, c.spec, security.security, hostWalls)
  if (unmet) return {ok: false, reason: 'CreateContainerConfigError', message: unmet}
  const program = resolveProgram(c.spec, input.images)
  if (!program.ok) return {ok: false, reason: 'CreateContainerError', message: program.message}
  const sandboxed = input.sandboxMode === 'namespaces'
  const root = join(input.sandbox, 'roots', c.name)
  // In a sandbox every mount is at its real path: the root of the view is /, so specs written for either mode work.
  const runtimeVars: Record<string, string> = {[VolumeRootEnv]: sandboxed ? '/' : root}
  const envResult = await buildContainerEnv({
    pod,
    container: c.spec,
    node: input.node,
    objects: input.ctx.objects,
    services: input.ctx.services,
    runtime: runtimeVars,
    image: program.program.env,
    path: input.path,
    podIP: input.podIP,
  })
  for (const e of envResult.events) input.podEvent(e.type, e.reason, e.message)
  if (!envResult.ok) return {ok: false, reason: 'CreateContainerConfigError', message: envResult.message}
  const env = envResult.env
  const messagePath = terminationMessagePath(c.spec)
  const terminationFile = terminationFileOf(input.sandbox, c.spec, sandboxed)
  let view: ContainerSandboxSpec | undefined
  let cwd: string
  let links: RealLink[] = []
  if (sandboxed) {
    const viewResult = await containerView({
      pod,
      container: c.spec,
      volumes: input.volumes,
      env,
      podFiles: input.podFiles,
      terminationFile,
      terminationMessagePath: messagePath,
      hostname: containerHostname(pod),
      stateDir: input.ctx.stateDir,
      walls: input.walls,
      layerDir: containerLayerDir(input.sandbox, c.spec.name),
    })
    if (!viewResult.ok) return {ok: false, reason: 'CreateContainerConfigError', message: viewResult.message}
    view = {
      ...viewResult.spec,
      security: {context: security.security, applyIdentity: hostWalls.identity, hostPID: pod.spec?.hostPID === true, hostIPC: pod.spec?.hostIPC === true, hostNetwork: pod.spec?.hostNetwork === true},
    }
    // The pod's network namespace (network/), made before its first container.
    if (input.netns) view = {...view, netns: input.netns}
    if (pod.spec?.shareProcessNamespace) view.pidNamespaceOf = await input.sharedPid()
    cwd = c.spec.workingDir || program.program.workingDir || '/'
  } else {
    const rootResult = await prepareContainerRoot(c.spec, input.sandbox, input.volumes, env)
    if (!rootResult.ok) return {ok: false, reason: 'CreateContainerConfigError', message: rootResult.message}
    links = rootResult.links
    cwd = plainWorkingDir(c, program.program.workingDir, root)
  }

  const prepared = await prepareProgram(program.program, c.spec, input.sandbox, env)
  if (!prepared.ok) return {ok: false, reason: 'CreateContainerError', message: prepared.message}
  // A mapped server program's files: at the same path inside the sandbox (under the hidden state dir).
  if (view && prepared.imageDir) view.binds.push({source: prepared.imageDir, target: prepared.imageDir, readOnly: false})
  // kubectl debug --target: the debug container joins the target's PID namespace.
  const target = c.kind === 'ephemeral' ? (c.spec as V1EphemeralContainer).targetContainerName : undefined
  if (view && target && !view.pidNamespaceOf) {
    const t = input.containers.find((x) => x.name === target && x.kind !== 'ephemeral')
    if (t?.proc?.sandboxed) view.pidNamespaceOf = t.proc.pid
  }
  return {ok: true, argv: prepared.argv, env, cwd, view, terminationFile, imageID: program.program.imageID, links}
}

/** Where a container's writable layer lives: one per container, remade for each instance. */
export function containerLayerDir(sandbox: string, container: string): string {
  return join(sandbox, 'layers', container)
}

const terminationMessagePath = (spec: V1Container) => spec.terminationMessagePath || DefaultTerminationMessagePath

/**
 * The host file behind a container's terminationMessagePath: in a sandbox
 * one of the pod's own, bound at that path; in the plain mode the path
 * mirrored under the container's root.
 */
export function terminationFileOf(sandbox: string, spec: V1Container, sandboxed: boolean): string {
  return sandboxed ? join(sandbox, 'termination', spec.name) : join(sandbox, 'roots', spec.name, terminationMessagePath(spec))
}

/** spec.workingDir (a path under a mountPath is its mirror), the image map's, or the container's root. */
function plainWorkingDir(c: ContainerState, imageDir: string | undefined, root: string): string {
  const dir = c.spec.workingDir || imageDir
  if (!dir) return root
  for (const m of c.spec.volumeMounts ?? []) {
    const rel = relative(m.mountPath, dir)
    if (!rel.startsWith('..') && !isAbsolute(rel)) return join(root, m.mountPath, rel)
  }
  return dir
}
