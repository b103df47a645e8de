import {execa} from 'execa'

/**
 * The KUBE-* iptables lines Kubernetes components leave on a host. kube-proxy
 * writes KUBE-FIREWALL (its martian-localhost DROP) into INPUT and OUTPUT and
 * its `--cleanup` keeps it, as the reference kubelet keeps KUBE-IPTABLES-HINT,
 * KUBE-KUBELET-CANARY and its own KUBE-FIREWALL. Whoever starts one takes a
 * snapshot first and, once it is stopped, deletes the lines that are new, so
 * the host is left as it was found: lines that were there before stay.
 */

const Tables = ['filter', 'nat', 'mangle', 'raw']
// Both backends: a component picks the one in use, and a host may have rules in either; a missing binary reads as empty.
const Families = ['iptables', 'ip6tables', 'iptables-legacy', 'ip6tables-legacy']
/** Only what Kubernetes components name KUBE-*: nothing else on the host is touched. */
const Ours = /(^| )KUBE-/

/** `iptables -S` lines per "<command> <table>". */
export type FirewallSnapshot = Record<string, string[]>

/** `iptables -S` lines of one table, with `-w` so a concurrent writer does not fail the read. */
async function lines(cmd: string, table: string): Promise<string[]> {
  const r = await execa(cmd, ['-w', '5', '-t', table, '-S'], {reject: false, stdin: 'ignore'})
  if (r.exitCode !== 0) return []
  return r.stdout.split('\n').filter((l) => Ours.test(l))
}

/** The KUBE-* lines of every table of both families. */
export async function snapshotFirewall(): Promise<FirewallSnapshot> {
  const keys = Families.flatMap((cmd) => Tables.map((table) => [cmd, table] as const))
  // Reads only, each waiting for the lock (-w): asked together.
  const read = await Promise.all(keys.map(([cmd, table]) => lines(cmd, table)))
  return Object.fromEntries(keys.map(([cmd, table], i) => [`${cmd} ${table}`, read[i]]))
}

/** Splits an `iptables -S` line into argv: double quotes group (comments), backslash escapes inside them. */
export function splitRule(line: string): string[] {
  const out: string[] = []
  let cur = ''
  let quoted = false
  let any = false
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]
    if (quoted) {
      if (ch === '\\' && i + 1 < line.length) cur += line[++i]
      else if (ch === '"') quoted = false
      else cur += ch
    } else if (ch === '"') {
      quoted = true
      any = true
    } else if (ch === ' ') {
      if (cur || any) out.push(cur)
      cur = ''
      any = false
    } else cur += ch
  }
  if (cur || any) out.push(cur)
  return out
}

/** The lines present now that were not in `before`. */
export function firewallAdded(before: FirewallSnapshot, now: FirewallSnapshot): FirewallSnapshot {
  const added: FirewallSnapshot = {}
  for (const [key, ls] of Object.entries(now)) {
    const had = new Set(before[key] ?? [])
    const extra = ls.filter((l) => !had.has(l))
    if (extra.length > 0) added[key] = extra
  }
  return added
}

/**
 * Deletes what was added since `before`: rules first (`-A` becomes `-D`), then
 * the chains they emptied. Returns what is still there that was not before.
 */
export async function restoreFirewall(before: FirewallSnapshot, log: (line: string) => void = () => undefined): Promise<FirewallSnapshot> {
  const added = firewallAdded(before, await snapshotFirewall())
  for (const [key, ls] of Object.entries(added)) {
    const [cmd, table] = key.split(' ')
    for (const l of ls.filter((x) => x.startsWith('-A '))) {
      const argv = splitRule(l)
      argv[0] = '-D'
      const r = await execa(cmd, ['-w', '5', '-t', table, ...argv], {reject: false, stdin: 'ignore'})
      log(`${cmd} -t ${table} ${argv.join(' ')}${r.exitCode === 0 ? '' : `: ${r.stderr.trim()}`}`)
    }
    for (const l of ls.filter((x) => x.startsWith('-N '))) {
      const chain = l.slice(3).trim()
      // A chain is flushed by its rules' deletes above; one another rule still jumps to cannot go, so a jump that was there before keeps it.
      const r = await execa(cmd, ['-w', '5', '-t', table, '-X', chain], {reject: false, stdin: 'ignore'})
      log(`${cmd} -t ${table} -X ${chain}${r.exitCode === 0 ? '' : `: ${r.stderr.trim()}`}`)
    }
  }
  return firewallAdded(before, await snapshotFirewall())
}
