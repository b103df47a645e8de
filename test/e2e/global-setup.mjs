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
  const {missingServiceBinaries} = await import('../../dist/cluster/services/binaries.js')
  let kubectl
  try {
    kubectl = findBinaries().kubectl
    // kube-proxy, metrics-server and CoreDNS: the cluster-services tests start a cluster of their own with them.
    if (missingServiceBinaries().length > 0) throw new Error('cluster services not built')
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
  // vnode's state base (its registry of state dirs) under the run's own dir, never the user's home.
  process.env.XDG_STATE_HOME = join(dir, 'state')
  // A short grace so the node lifecycle controller's reaction can be tested in seconds, not minutes.
  // No cluster services here: most tests need none, and the ones that do start a cluster of their own. On loopback (no device
  // of its own): most tests reach their pods on the host network; the pod network's tests start clusters of their own.
  execFileSync(process.execPath, [cliPath(), 'cluster', 'up', '--dir', clusterDir, '--port', '0', '--node-monitor-grace-period', '16s', '--no-services', '--loopback'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  process.env[E2eEnv.dir] = dir
  process.env[E2eEnv.kubeconfig] = join(clusterDir, 'kubeconfig')
  process.env[E2eEnv.binDir] = dirname(kubectl)
}
