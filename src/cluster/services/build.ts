import {mkdir, mkdtemp, rename, rm} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import {UserError} from '../../errors.js'
import {ldflags} from '../build.js'
import {controlPlaneModuleDir} from '../paths.js'
import {pinnedVersions} from '../versions.js'
import {serviceBinaryPath} from './binaries.js'
import {CoreDnsModule, CoreDnsVersion, KubeProxyPackage, MetricsServerModule, MetricsServerVersion, ServiceBinaries, type ServiceBinary} from './versions.js'

export interface ServicesBuildOptions {
  log: (line: string) => void
  force?: boolean
}

const goEnv = {GOTOOLCHAIN: 'local'}

/** One `go build` or `go install` into a temporary name, renamed when complete. */
async function buildOne(name: ServiceBinary, target: string): Promise<void> {
  const {execa} = await import('execa')
  await mkdir(dirname(target), {recursive: true})
  const tmpDir = await mkdtemp(join(dirname(target), '.build-'))
  try {
    if (name === 'kube-proxy') {
      await execa('go', ['build', '-trimpath', '-ldflags', ldflags(pinnedVersions().kubernetes), '-o', join(tmpDir, name), KubeProxyPackage], {
        cwd: controlPlaneModuleDir(),
        env: {...goEnv, GOFLAGS: '-mod=readonly'},
        stdio: ['ignore', 'inherit', 'inherit'],
      })
    } else {
      const pkg = name === 'metrics-server' ? `${MetricsServerModule}@${MetricsServerVersion}` : `${CoreDnsModule}@${CoreDnsVersion}`
      await execa('go', ['install', '-trimpath', '-ldflags', '-s -w', pkg], {
        cwd: tmpDir,
        env: {...goEnv, GOBIN: tmpDir},
        stdio: ['ignore', 'inherit', 'inherit'],
      })
    }
    await rename(join(tmpDir, name), target)
  } finally {
    await rm(tmpDir, {recursive: true, force: true})
  }
}

/** Builds kube-proxy, metrics-server and CoreDNS into the cache, skipping cached ones. */
export async function buildClusterServices(opts: ServicesBuildOptions): Promise<void> {
  const {stat} = await import('node:fs/promises')
  let n = 0
  for (const name of ServiceBinaries) {
    n++
    const target = serviceBinaryPath(name)
    const step = `[services ${n}/${ServiceBinaries.length}] ${name}`
    if (
      !opts.force &&
      (await stat(target).then(
        () => true,
        () => false,
      ))
    ) {
      opts.log(`${step}: cached`)
      continue
    }
    const started = Date.now()
    opts.log(`${step}: building`)
    const tick = setInterval(() => opts.log(`${step}: still building (${Math.round((Date.now() - started) / 1000)}s)`), 30_000)
    try {
      await buildOne(name, target)
    } catch (error) {
      throw new UserError(`building ${name} failed: ${(error as Error).message.split('\n')[0]}`)
    } finally {
      clearInterval(tick)
    }
    opts.log(`${step}: built in ${Math.round((Date.now() - started) / 1000)}s`)
  }
}
