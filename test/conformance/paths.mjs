// Where the conformance tooling finds the repository and keeps its state.
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const conformanceDir = join(repoRoot, 'test', 'conformance')
