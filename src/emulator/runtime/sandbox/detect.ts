import {execFile} from 'node:child_process'
import {spawn} from 'node:child_process'
import {join} from 'node:path'
import {BwrapProgram} from './bwrap.js'
import {layerPrefix, prepareRootLayer, removeRootLayer, type LayerMode} from './root-layer.js'
import type {SandboxMode, SandboxRequest} from './spec.js'

/**
 * How long the trial sandbox may take before the host counts as not allowing
 * one. It takes milliseconds; the margin is for a machine under heavy load,
 * where a short limit would quietly take the sandbox away.
 */
export const DefaultDetectTimeoutMs = 30_000

export interface SandboxSupport {
  mode: SandboxMode
  /** Why the node runs without namespaces (asked for `none`, or what the host refused). */
  reason?: string
}

/**
 * What the host allows: a real trial run of the same kind of sandbox a
 * container gets (mount, PID and UTS namespaces, PID 1). As root that needs
 * nothing more; unprivileged, bwrap makes a user namespace, which some
 * hosts forbid. `auto` falls back to `none` with the reason; `namespaces`
 * insists and fails.
 */
export async function detectSandbox(request: SandboxRequest, timeoutMs = DefaultDetectTimeoutMs): Promise<SandboxSupport> {
  if (request === 'none') return {mode: 'none', reason: 'asked for with --sandbox none'}
  const refused = await trialRun(timeoutMs)
  if (!refused) return {mode: 'namespaces'}
  if (request === 'namespaces') throw new Error(`--sandbox namespaces: this host does not allow a pod sandbox: ${refused}`)
  return {mode: 'none', reason: refused}
}

/** undefined when the trial sandbox ran, else what went wrong. */
function trialRun(timeoutMs: number): Promise<string | undefined> {
  const args = ['--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '--unshare-pid', '--as-pid-1', '--unshare-uts', '--hostname', 'vnode-probe', '--', 'true']
  return new Promise((resolve) => {
    execFile(BwrapProgram, args, {timeout: timeoutMs}, (error, _stdout, stderr) => {
      if (!error) return resolve(undefined)
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return resolve(`${BwrapProgram} (bubblewrap) is not installed`)
      if (error.killed) return resolve(`${BwrapProgram} did not finish a trial sandbox within ${timeoutMs / 1000} s`)
      resolve(`${BwrapProgram} failed: ${String(stderr).trim() || error.message}`)
    })
  })
}

export interface RootLayerSupport {
  /** How a container's writable layer is built; undefined: it cannot be, and the host's files are read-only in every container. */
  mode?: LayerMode
  /** What the node says of it: the mechanism, or why there is none. */
  how: string
}

/**
 * Whether (and how) a container's writable layer can be built here: a
 * real trial of the same overlays a container gets (root-layer.ts), in a
 * probe directory of the state dir, removed after. As root, a mount
 * namespace of its own; otherwise a user namespace, where the kernel
 * allows overlayfs (Linux 5.11 and later). Without one, containers still
 * run, on a read-only view of the host (writes outside volumes fail with
 * EROFS), and the node says so.
 */
export async function detectRootLayer(sandbox: SandboxMode, stateDir: string, timeoutMs = DefaultDetectTimeoutMs): Promise<RootLayerSupport> {
  if (sandbox !== 'namespaces') return {how: 'no writable layer: no sandbox'}
  const mode: LayerMode = process.getuid?.() === 0 ? 'root' : 'user-namespace'
  const dir = join(stateDir, 'layer-probe')
  try {
    const layer = await prepareRootLayer(dir, mode)
    const [file, ...args] = [...layerPrefix(layer), 'true']
    const refused = await new Promise<string | undefined>((resolve) => {
      const child = spawn(file!, args, {stdio: ['ignore', 'ignore', 'pipe'], timeout: timeoutMs})
      let stderr = ''
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')))
      child.once('error', (e) => resolve(e.message))
      child.once('close', (code, signal) => resolve(code === 0 ? undefined : stderr.trim() || `exit ${code ?? signal}`))
    })
    if (refused) return {how: `no writable layer (the host's files are read-only in every container): overlayfs ${mode === 'root' ? 'refused' : 'refused in a user namespace'}: ${refused}`}
    return {mode, how: `a writable layer per container: kernel overlayfs ${mode === 'root' ? 'over the root filesystem' : 'over each top-level directory, in a user namespace'}`}
  } catch (error) {
    return {how: `no writable layer (the host's files are read-only in every container): ${(error as Error).message}`}
  } finally {
    removeRootLayer(dir)
  }
}
