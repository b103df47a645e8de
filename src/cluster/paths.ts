import {homedir} from 'node:os'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

/** The binaries a local control plane needs, in start order. */
export const ControlPlaneBinaries = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl'] as const
export type ControlPlaneBinary = (typeof ControlPlaneBinaries)[number]

/** Root of the installed package (holds controlplane/go.mod). Works from src/ under jest and from dist/. */
export function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
}

export function controlPlaneModuleDir(): string {
  return join(packageRoot(), 'controlplane')
}

/** Build cache: outside the repository so binaries never end up in git. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.VNODE_CACHE_DIR) return env.VNODE_CACHE_DIR
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache')
  return join(base, 'kubectl-vnode')
}

/** Default directory for `cluster up` state (certs, kubeconfig, data, logs). */
export function defaultClusterDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.VNODE_CLUSTER_DIR) return env.VNODE_CLUSTER_DIR
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state')
  return join(base, 'kubectl-vnode', 'cluster')
}
