import {execFileSync} from 'node:child_process'
import {rmSync} from 'node:fs'
import {join} from 'node:path'
import {cliPath, E2eEnv} from './env.mjs'

export default async function globalTeardown() {
  const dir = process.env[E2eEnv.dir]
  if (!dir) return
  execFileSync(process.execPath, [cliPath(), 'cluster', 'down', '--dir', join(dir, 'cluster')], {stdio: ['ignore', 'ignore', 'inherit']})
  if (!process.env.VNODE_E2E_KEEP) rmSync(dir, {recursive: true, force: true})
}
