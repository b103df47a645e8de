import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {join} from 'node:path'

/**
 * Named network namespaces, as `ip netns` keeps them: a bind mount at
 * /run/netns/<name> holds the namespace open without any process in it, so
 * a pod's address survives its containers' restarts and a vnode restart.
 */

export const NetnsDir = '/run/netns'

export function netnsPath(name: string): string {
  return join(NetnsDir, name)
}

export function netnsExists(name: string): boolean {
  return existsSync(netnsPath(name))
}

async function ip(args: string[]): Promise<void> {
  const r = await execa('ip', args, {reject: false, stdin: 'ignore'})
  if (r.exitCode !== 0) throw new Error(`ip ${args.join(' ')}: ${String(r.stderr).trim()}`)
}

export async function addNetns(name: string): Promise<string> {
  if (!netnsExists(name)) await ip(['netns', 'add', name])
  return netnsPath(name)
}

export async function deleteNetns(name: string): Promise<void> {
  if (netnsExists(name)) await ip(['netns', 'del', name])
}

/** Names of the namespaces under /run/netns that start with prefix. */
export async function listNetns(prefix: string): Promise<string[]> {
  const {readdir} = await import('node:fs/promises')
  return (await readdir(NetnsDir).catch(() => [] as string[])).filter((n) => n.startsWith(prefix))
}
