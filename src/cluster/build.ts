import {mkdir, rename, rm, stat} from 'node:fs/promises'
import {join} from 'node:path'
import {UserError} from '../errors.js'
import {buildCacheDir} from './binaries.js'
import {controlPlaneModuleDir, ControlPlaneBinaries, type ControlPlaneBinary} from './paths.js'
import {pinnedVersions} from './versions.js'

/** The Go package each binary is built from. */
export const BinaryPackages: Record<ControlPlaneBinary, string> = {
  etcd: 'go.etcd.io/etcd/server/v3',
  'kube-apiserver': 'k8s.io/kubernetes/cmd/kube-apiserver',
  'kube-controller-manager': 'k8s.io/kubernetes/cmd/kube-controller-manager',
  'kube-scheduler': 'k8s.io/kubernetes/cmd/kube-scheduler',
  kubectl: 'k8s.io/kubernetes/cmd/kubectl',
}

/**
 * Stamps the Kubernetes version into the binaries, as the release build does,
 * so `kubectl version` and the API server's /version report it instead of v0.0.0.
 */
export function ldflags(kubernetesVersion: string): string {
  const [major, minor] = kubernetesVersion.replace(/^v/, '').split('.')
  const vars = {gitVersion: kubernetesVersion, gitMajor: major, gitMinor: minor, gitTreeState: 'clean'}
  const flags = ['-s', '-w']
  for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version']) {
    for (const [k, v] of Object.entries(vars)) flags.push(`-X ${pkg}.${k}=${v}`)
  }
  return flags.join(' ')
}

export interface BuildOptions {
  outDir?: string
  log: (line: string) => void
  /** Rebuild binaries that are already cached. */
  force?: boolean
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}

function elapsed(since: number): string {
  const s = Math.round((Date.now() - since) / 1000)
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`
}

/**
 * Builds the pinned etcd and Kubernetes binaries with the machine's Go, one
 * at a time (two cores do not gain from parallel links), into the cache.
 * Each binary is written to a temporary name and renamed, so an interrupted
 * build never leaves a truncated binary that a later run would trust.
 */
export async function buildControlPlane(opts: BuildOptions): Promise<string> {
  const {execa} = await import('execa')
  const outDir = opts.outDir ?? buildCacheDir()
  const versions = pinnedVersions()
  await mkdir(outDir, {recursive: true})
  try {
    await execa('go', ['version'])
  } catch {
    throw new UserError('the Go toolchain is not on PATH; the control plane is built from source with go')
  }
  opts.log(`control plane: kubernetes ${versions.kubernetes}, etcd ${versions.etcd} -> ${outDir}`)
  let n = 0
  for (const name of ControlPlaneBinaries) {
    n++
    const target = join(outDir, name)
    const step = `[${n}/${ControlPlaneBinaries.length}] ${name}`
    if (!opts.force && (await exists(target))) {
      opts.log(`${step}: cached`)
      continue
    }
    const started = Date.now()
    opts.log(`${step}: building ${BinaryPackages[name]}`)
    const tick = setInterval(() => opts.log(`${step}: still building (${elapsed(started)})`), 30_000)
    const tmp = `${target}.tmp-${process.pid}`
    try {
      await execa('go', ['build', '-trimpath', '-ldflags', ldflags(versions.kubernetes), '-o', tmp, BinaryPackages[name]], {
        cwd: controlPlaneModuleDir(),
        env: {GOFLAGS: '-mod=readonly', GOTOOLCHAIN: 'local'},
        stdio: ['ignore', 'inherit', 'inherit'],
      })
      await rename(tmp, target)
    } catch (error) {
      await rm(tmp, {force: true})
      throw new UserError(`building ${name} failed: ${(error as Error).message.split('\n')[0]}`)
    } finally {
      clearInterval(tick)
    }
    opts.log(`${step}: built in ${elapsed(started)}`)
  }
  return outDir
}
