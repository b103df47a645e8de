import {execFileSync} from 'node:child_process'
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {cliPath, E2eEnv} from './env.mjs'

/**
 * One real control plane for the whole e2e run. Binaries come from the build
 * cache (built here when missing). When they cannot be built, the suite is
 * skipped with a loud message, except under CI=true, where that is a failure.
 */
export default async function globalSetup() {
  const {findBinaries} = await import('../../dist/cluster/binaries.js')
  let kubectl
  try {
    kubectl = findBinaries().kubectl
  } catch {
    try {
      execFileSync(process.execPath, [cliPath(), 'cluster', 'build'], {stdio: 'inherit'})
      kubectl = findBinaries().kubectl
    } catch (error) {
      const reason = `control plane binaries could not be built: ${error.message}`
      if (process.env.CI === 'true') throw new Error(reason, {cause: error})
      process.stderr.write(`\n\n!!!!!!!!!! E2E SUITE SKIPPED: ${reason} !!!!!!!!!!\n\n`)
      process.env[E2eEnv.skip] = reason
      return
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'vnode-e2e-'))
  const clusterDir = join(dir, 'cluster')
  // A short grace so the node lifecycle controller's reaction can be tested in seconds, not minutes.
  execFileSync(process.execPath, [cliPath(), 'cluster', 'up', '--dir', clusterDir, '--port', '0', '--node-monitor-grace-period', '16s'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  process.env[E2eEnv.dir] = dir
  process.env[E2eEnv.kubeconfig] = join(clusterDir, 'kubeconfig')
  process.env[E2eEnv.binDir] = dirname(kubectl)
}
