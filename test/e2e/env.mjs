// What the global setup shares with the e2e test files, through the environment.
// Plain ESM: jest loads global setup without the TypeScript transform.
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

export const E2eEnv = {
  dir: 'VNODE_E2E_DIR',
  kubeconfig: 'VNODE_E2E_KUBECONFIG',
  binDir: 'VNODE_E2E_BIN_DIR',
  skip: 'VNODE_E2E_SKIP',
}

/** The file names (comma-separated) of the run's files that have the machine to themselves, set by sequencer.mjs: they run first. */
export const MachineFirstEnv = 'VNODE_E2E_MACHINE_FIRST'

/** bin/kubectl-vnode of this checkout (runs dist/, built by `npm test`'s pretest). */
export function cliPath() {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'kubectl-vnode')
}
