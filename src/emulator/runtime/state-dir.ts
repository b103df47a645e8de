import {statfsSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {spreadSubdirectories} from '../../common/spread-dirs.js'
import {logsDir} from './logs/layout.js'
import {podsDir} from './pod/record.js'

/**
 * The node's state dir made ready for pods, once at the provider's start:
 * the trees of the pods' directories and of their logs, each pod's in a
 * block group of its own (spread-dirs.ts: a burst's inode allocations on
 * ext4). Resolves to the storage the state dir's filesystem offers (the
 * node's ephemeral-storage), undefined when it cannot be read.
 */
export async function prepareStateDir(stateDir: string): Promise<number | undefined> {
  const trees = [podsDir(stateDir), logsDir(stateDir)]
  for (const dir of trees) await mkdir(dir, {recursive: true, mode: 0o700})
  await spreadSubdirectories(trees)
  try {
    const fs = statfsSync(stateDir)
    return fs.blocks * fs.bsize
  } catch {
    return undefined
  }
}
