import {existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {detectRootLayer} from './detect.js'
import {registerStateDir} from '../../../common/state-dirs.js'
import {hiddenPaths, kubeconfigFiles} from './hidden-paths.js'
import type {SandboxMode, SandboxWalls} from './spec.js'

export interface SandboxWallsInput {
  sandbox: SandboxMode
  stateDir: string
  /** `--kubeconfig`, else KUBECONFIG, else ~/.kube/config: what vnode was started with. */
  kubeconfig?: string
  hide?: string[]
  expose?: string[]
  path?: string
  log: (line: string) => void
}

/** The empty file a hidden file is replaced by, in the node's state dir. */
export const EmptyFileName = 'empty'

/**
 * The filesystem walls of a node's sandbox, settled at `up`: its state dir
 * registered (so every node hides it: a plain node's too, whose pods'
 * secrets and volumes are there as well), whether a writable layer can be
 * built (a node without one says so: its containers see the host
 * read-only), the hidden paths.
 */
export async function sandboxWalls(input: SandboxWallsInput): Promise<SandboxWalls | undefined> {
  registerStateDir(input.stateDir)
  if (input.sandbox !== 'namespaces') return undefined
  mkdirSync(input.stateDir, {recursive: true, mode: 0o700})
  const emptyFile = join(input.stateDir, EmptyFileName)
  if (!existsSync(emptyFile)) writeFileSync(emptyFile, '', {mode: 0o444})
  const layer = await detectRootLayer(input.sandbox, input.stateDir)
  if (!layer.mode) input.log(`sandbox: ${layer.how}`)
  const hide = hiddenPaths({stateDir: input.stateDir, kubeconfigs: kubeconfigFiles(input.kubeconfig), hide: input.hide, expose: input.expose, path: input.path})
  return {...(layer.mode ? {layer: layer.mode} : {}), hide, emptyFile}
}
