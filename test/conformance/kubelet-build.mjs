// Builds the reference kubelet from the same k8s.io/kubernetes the control
// plane pins, into the build cache next to the control plane, keyed by version.
// The kubelet needs modules the control plane never needed, so it is built in
// a module of its own (a copy of controlplane/go.mod in the cache) with the
// module proxy reachable (-mod=mod); the repository's go.mod stays untouched.
import {copyFile, mkdir, rename, rm, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {execa} from 'execa'
import {repoRoot} from './paths.mjs'

/** Bumped when the way the kubelet is built changes, so an older cached build is not reused. */
export const KubeletRecipe = 'k1'

async function exists(path) {
  return stat(path).then(
    () => true,
    () => false,
  )
}

async function cluster() {
  const versions = await import(join(repoRoot, 'dist/cluster/versions.js'))
  const build = await import(join(repoRoot, 'dist/cluster/build.js'))
  const paths = await import(join(repoRoot, 'dist/cluster/paths.js'))
  return {versions, build, paths}
}

/** Where the kubelet of the pinned version lives once built. */
export async function kubeletPath() {
  const {versions, paths} = await cluster()
  const v = versions.pinnedVersions().kubernetes
  return join(paths.cacheRoot(), 'kubelet', `kubernetes-${v}_${KubeletRecipe}`, 'kubelet')
}

export async function buildKubelet(log = (line) => console.error(line)) {
  const {versions, build, paths} = await cluster()
  const version = versions.pinnedVersions().kubernetes
  const target = await kubeletPath()
  if (await exists(target)) {
    log(`kubelet ${version}: cached at ${target}`)
    return target
  }
  const moduleDir = join(paths.cacheRoot(), 'kubelet', `module-${version}`)
  await mkdir(moduleDir, {recursive: true})
  for (const f of ['go.mod', 'go.sum']) await copyFile(join(paths.controlPlaneModuleDir(), f), join(moduleDir, f))
  await writeFile(join(moduleDir, 'tools.go'), '//go:build tools\n\npackage controlplane\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n')
  const started = Date.now()
  log(`kubelet ${version}: building k8s.io/kubernetes/cmd/kubelet -> ${target}`)
  const tmp = `${target}.tmp-${process.pid}`
  await mkdir(join(target, '..'), {recursive: true})
  try {
    await execa('go', ['build', '-trimpath', '-ldflags', build.ldflags(version), '-o', tmp, 'k8s.io/kubernetes/cmd/kubelet'], {
      cwd: moduleDir,
      env: {GOFLAGS: '-mod=mod -buildvcs=false', GOTOOLCHAIN: 'local'},
      stdio: ['ignore', 'inherit', 'inherit'],
    })
    await rename(tmp, target)
  } catch (error) {
    await rm(tmp, {force: true})
    throw new Error(`building the kubelet failed: ${error.shortMessage ?? error.message}`, {cause: error})
  }
  log(`kubelet ${version}: built in ${Math.round((Date.now() - started) / 1000)}s`)
  return target
}

if (import.meta.url === `file://${process.argv[1]}`) {
  buildKubelet().catch((e) => {
    console.error(`error: ${e.message}`)
    process.exit(1)
  })
}
