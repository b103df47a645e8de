import {accessSync, constants} from 'node:fs'
import {delimiter, join} from 'node:path'
import {UserError} from '../errors.js'
import {cacheRoot, ControlPlaneBinaries, type ControlPlaneBinary} from './paths.js'
import {pinnedVersions} from './versions.js'

export type BinaryPaths = Record<ControlPlaneBinary, string>

/** Bumped when the way binaries are built changes, so older cached builds are not reused. */
export const BuildRecipe = 'r2'

/** Where `controlplane:build` puts the binaries of one pinned release. */
export function buildCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = pinnedVersions()
  return join(cacheRoot(env), 'controlplane', `kubernetes-${v.kubernetes}_etcd-${v.etcd}_${BuildRecipe}`)
}

/** An existing file this user may run. */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * The directories searched, in order: --bin-dir, $KUBEBUILDER_ASSETS (the
 * envtest convention), the build cache, then PATH.
 */
export function searchDirs(binDir: string | undefined, env: NodeJS.ProcessEnv = process.env): string[] {
  const dirs: string[] = []
  if (binDir) dirs.push(binDir)
  if (env.KUBEBUILDER_ASSETS) dirs.push(env.KUBEBUILDER_ASSETS)
  dirs.push(buildCacheDir(env))
  for (const d of (env.PATH ?? '').split(delimiter)) if (d) dirs.push(d)
  return dirs
}

export function findBinaries(binDir?: string, env: NodeJS.ProcessEnv = process.env): BinaryPaths {
  const dirs = searchDirs(binDir, env)
  const found: Partial<BinaryPaths> = {}
  const missing: string[] = []
  for (const name of ControlPlaneBinaries) {
    const dir = dirs.find((d) => isExecutable(join(d, name)))
    if (dir) found[name] = join(dir, name)
    else missing.push(name)
  }
  if (missing.length > 0) {
    throw new UserError(
      `control plane binaries not found: ${missing.join(', ')} (looked in ${binDir ? '--bin-dir, ' : ''}` +
        `$KUBEBUILDER_ASSETS, ${buildCacheDir(env)} and PATH); build them with: npm run controlplane:build`,
    )
  }
  return found as BinaryPaths
}
