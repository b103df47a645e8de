import {existsSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {isAbsolute, join, resolve} from 'node:path'
import {isWithin} from './paths.js'

/**
 * Where vnode's state dirs are: under one base by default (every node's,
 * `nodes/<name>`, and the local control plane's, `cluster`), and anywhere
 * `--state-dir` or `cluster up --dir` put them, each recorded in the base's
 * registry so that every node can hide every one from its containers.
 */

/** The registry of state and cluster dirs outside the base, one absolute path a line. */
export const StateDirRegistry = 'state-dirs'

/** Where vnode keeps its state by default: every node's and the local control plane's. */
export function stateBase(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'kubectl-vnode')
}

/** Where every node's default state dir is: `<base>/nodes/<name>`. */
export function nodesStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(stateBase(env), 'nodes')
}

/** Records a state or cluster dir outside the base, so every node hides it; dirs that are gone are dropped. */
export function registerStateDir(dir: string, env: NodeJS.ProcessEnv = process.env): void {
  const base = stateBase(env)
  const abs = resolve(dir)
  if (isWithin(base, abs)) return
  const known = registeredStateDirs(env)
  const kept = known.filter((d) => existsSync(d))
  if (known.includes(abs) && kept.length === known.length) return
  try {
    mkdirSync(base, {recursive: true, mode: 0o700})
    writeFileSync(join(base, StateDirRegistry), [...kept.filter((d) => d !== abs), abs].join('\n') + '\n', {mode: 0o600})
  } catch {
    // A base that cannot be written: this node still hides its own dir.
  }
}

export function registeredStateDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  try {
    return readFileSync(join(stateBase(env), StateDirRegistry), 'utf8')
      .split('\n')
      .filter((l) => isAbsolute(l))
  } catch {
    return []
  }
}
