import {execa} from 'execa'

/**
 * portmap's DEL removes a pod's own chains but leaves the shared
 * CNI-HOSTPORT-DNAT chain and the jumps to it. The last node network to go
 * removes them, when no other pod on this host still has a port mapping
 * in it.
 */

export const HostportChain = 'CNI-HOSTPORT-DNAT'

async function iptables(args: string[]): Promise<{ok: boolean; stdout: string}> {
  const r = await execa('iptables', ['-w', '5', '-t', 'nat', ...args], {reject: false, stdin: 'ignore'})
  return {ok: r.exitCode === 0, stdout: String(r.stdout)}
}

export async function removeHostportChainIfEmpty(): Promise<void> {
  const rules = await iptables(['-S', HostportChain])
  if (!rules.ok) return
  if (rules.stdout.split('\n').some((l) => l.startsWith('-A '))) return
  for (const chain of ['PREROUTING', 'OUTPUT']) {
    await iptables(['-D', chain, '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', HostportChain])
  }
  await iptables(['-X', HostportChain])
}
