import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {helpers} from '../process/helper-runner.js'
import {hostProgram} from '../process/host-programs.js'

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

type NetnsOp = {verb: 'add' | 'del'; name: string}

/** How long one `ip -batch` may run (a burst's namespaces in one batch take well under a second). */
export const DefaultNetnsBatchTimeoutMs = 60_000

/** The `ip -batch` input of the operations, one line each. */
export function batchInput(ops: readonly NetnsOp[]): string {
  return ops.map((o) => `netns ${o.verb} ${o.name}\n`).join('')
}

/**
 * Additions and deletions asked for while an `ip` runs go together into the
 * next one (`ip -force -batch -`, which goes on past a failed line): a burst
 * of pod starts or ends costs a few program starts, not one per pod. Each
 * caller waits for its own batch only, and learns its outcome from
 * /run/netns once that batch has run. The node's helper starts `ip`
 * (process/helper-runner.ts), as it does the CNI plugins: the warm pool's
 * refill makes one namespace at a time, and a fork of vnode per entry held
 * its event loop about 4 ms each.
 */
class NetnsBatches {
  private pending: Array<NetnsOp & {ran: (stderr: string) => void}> = []
  private draining = false
  /** `ip` runs so far. */
  runs = 0

  async run(op: NetnsOp): Promise<void> {
    const stderr = await new Promise<string>((ran) => {
      this.pending.push({...op, ran})
      void this.drain()
    })
    if (netnsExists(op.name) !== (op.verb === 'add')) throw new Error(`ip netns ${op.verb} ${op.name}: ${stderr || 'no effect'}`)
  }

  private async drain(): Promise<void> {
    if (this.draining) return
    this.draining = true
    try {
      while (this.pending.length > 0) {
        const ops = this.pending
        this.pending = []
        this.runs++
        const r = await helpers.run(hostProgram('ip'), ['-force', '-batch', '-'], {input: batchInput(ops), env: {}, timeoutMs: DefaultNetnsBatchTimeoutMs})
        const stderr = r.exitCode === 0 ? '' : r.stderr.trim() || (r.timedOut ? 'timed out' : `exit ${r.exitCode ?? 'by a signal'}`)
        for (const o of ops) o.ran(stderr)
      }
    } finally {
      this.draining = false
    }
  }
}

const batches = new NetnsBatches()

/** The `ip` programs started for namespace additions and deletions so far (a burst shares them). */
export function netnsProgramRuns(): number {
  return batches.runs
}

export async function addNetns(name: string): Promise<string> {
  if (!netnsExists(name)) await batches.run({verb: 'add', name})
  return netnsPath(name)
}

export async function deleteNetns(name: string): Promise<void> {
  if (netnsExists(name)) await batches.run({verb: 'del', name})
}

/** Names of the namespaces under /run/netns that start with prefix. */
export async function listNetns(prefix: string): Promise<string[]> {
  const {readdir} = await import('node:fs/promises')
  return (await readdir(NetnsDir).catch(() => [] as string[])).filter((n) => n.startsWith(prefix))
}
