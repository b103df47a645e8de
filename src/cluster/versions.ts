import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {controlPlaneModuleDir} from './paths.js'

export interface ControlPlaneVersions {
  kubernetes: string
  etcd: string
}

/**
 * The pinned versions come from controlplane/go.mod: the one place they are written down.
 */
export function pinnedVersions(moduleDir = controlPlaneModuleDir()): ControlPlaneVersions {
  const gomod = readFileSync(join(moduleDir, 'go.mod'), 'utf8')
  const find = (mod: string): string => {
    const m = new RegExp(`^\\s*${mod.replaceAll('.', '\\.')}\\s+(v[0-9][^\\s]*)`, 'm').exec(gomod)
    if (!m) throw new Error(`controlplane/go.mod does not require ${mod}`)
    return m[1]
  }
  return {kubernetes: find('k8s.io/kubernetes'), etcd: find('go.etcd.io/etcd/server/v3')}
}
