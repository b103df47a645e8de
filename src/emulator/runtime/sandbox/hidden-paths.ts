import {existsSync, readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {delimiter, dirname, isAbsolute, join, resolve} from 'node:path'
import {registeredStateDirs, stateBase} from '../../../common/state-dirs.js'
import {isWithin} from '../../../common/paths.js'

/**
 * What no container sees of the host (an empty tmpfs on a directory, an
 * empty file on a file): credentials a pod could use against the user or
 * the cluster, whatever its spec asks. In this order:
 *  - every vnode state dir on the host: the base directory they live in by
 *    default (`$XDG_STATE_HOME/kubectl-vnode`, also the default
 *    `cluster up` dir), and every state or cluster dir `up` and `cluster up`
 *    were given elsewhere, which they record in that base's registry;
 *  - the kubeconfig files vnode was started with, every file they
 *    reference (client keys, CA bundles, token files), and the directory of
 *    one that sits in a local control plane's dir (`pki/ca.key` beside it);
 *  - DefaultHiddenPaths (`~` is the user's home), and each `--hide`;
 * less what `--expose` names (never a state dir: those are always hidden).
 * A default location that holds a directory of the user's PATH stays
 * visible, so the toolchain does; the view is read-only in any case.
 */
export const DefaultHiddenPaths = [
  '~/.kube',
  '~/.ssh',
  '~/.aws',
  '~/.config/gcloud',
  '~/.azure',
  '~/.docker',
  '~/.gnupg',
  '~/.netrc',
  '~/.git-credentials',
  '~/.config/gh',
  '~/.password-store',
  '~/.vault-token',
  '/etc/shadow',
  '/etc/gshadow',
  '/etc/shadow-',
  '/etc/gshadow-',
  '/etc/kubernetes',
  '/etc/ssh',
  '/var/lib/kubelet',
] as const

/** The kubeconfig files a client started with these settings reads (client-go's loading rules). */
export function kubeconfigFiles(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string[] {
  if (flag) return [resolve(flag)]
  if (env.KUBECONFIG)
    return env.KUBECONFIG.split(delimiter)
      .filter(Boolean)
      .map((p) => resolve(p))
  return [join(homedir(), '.kube', 'config')]
}

/** Keys of a kubeconfig that name a file, resolved against the kubeconfig's directory as client-go does. */
const FileKeys = ['certificate-authority', 'client-certificate', 'client-key', 'tokenFile', 'token-file']

/** The files a kubeconfig references (a line scan: the keys are unique to file references). */
export function kubeconfigReferences(file: string): string[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return []
  }
  const out: string[] = []
  for (const line of text.split('\n')) {
    const m = /^\s*-?\s*([A-Za-z-]+):\s*("?)([^"]+)\2\s*$/.exec(line)
    if (!m || !FileKeys.includes(m[1]!)) continue
    out.push(resolve(dirname(file), m[3]!.trim()))
  }
  return out
}

export interface HiddenPathsInput {
  stateDir: string
  kubeconfigs: string[]
  hide?: string[]
  expose?: string[]
  /** The PATH containers get: a default location holding one of its directories stays visible. */
  path?: string
  env?: NodeJS.ProcessEnv
}

/** The host paths hidden from every container of this node. */
export function hiddenPaths(input: HiddenPathsInput): string[] {
  const env = input.env ?? process.env
  const home = env.HOME || homedir()
  const expand = (p: string) => resolve(p === '~' ? home : p.startsWith('~/') ? join(home, p.slice(2)) : p)
  const expose = (input.expose ?? []).map(expand)
  const pathDirs = (input.path ?? '').split(delimiter).filter((d) => isAbsolute(d))
  const always = [stateBase(env), ...registeredStateDirs(env), resolve(input.stateDir)]
  const credentials: string[] = []
  for (const k of input.kubeconfigs) {
    credentials.push(k, ...kubeconfigReferences(k))
    if (existsSync(join(dirname(k), 'pki', 'ca.key'))) credentials.push(dirname(k))
  }
  const defaults = DefaultHiddenPaths.map(expand).filter((p) => !pathDirs.some((d) => isWithin(p, d)))
  const asked = [...credentials, ...defaults, ...(input.hide ?? []).map(expand)].filter((p) => !expose.some((e) => e === p))
  // A path inside another hidden one is gone already: masking it again would make its mount point there.
  const all = [...always, ...asked]
  return all.filter((p, i) => all.indexOf(p) === i && !all.some((o) => o !== p && isWithin(o, p)))
}
