/**
 * Service ClusterIPs are virtual: only kube-proxy's rules give them meaning.
 * As kube-proxy's IPVS mode does with kube-ipvs0, the service range is routed
 * to a local dummy interface, so a connection to a ClusterIP that no rule
 * translates is swallowed here instead of following the default route off
 * this machine. Where the kernel has no dummy driver, an empty bridge does
 * the same: nothing answers its ARP, so the connection fails with "no route
 * to host" within seconds.
 */

export const ServiceRouteInterface = 'vnode-svc0'

async function ip(args: string[]): Promise<{ok: boolean; stdout: string; stderr: string}> {
  const {execa} = await import('execa')
  const r = await execa('ip', args, {reject: false, stdin: 'ignore'})
  return {ok: r.exitCode === 0, stdout: String(r.stdout), stderr: String(r.stderr)}
}

export async function serviceRouteExists(): Promise<boolean> {
  return (await ip(['link', 'show', 'dev', ServiceRouteInterface])).ok
}

/** Creates the dummy interface and routes cidr to it; throws with ip's message when it cannot. */
export async function addServiceRoute(cidr: string): Promise<void> {
  if (!(await ip(['link', 'add', ServiceRouteInterface, 'type', 'dummy'])).ok) {
    const r = await ip(['link', 'add', ServiceRouteInterface, 'type', 'bridge'])
    if (!r.ok) throw new Error(`ip link add ${ServiceRouteInterface}: ${r.stderr.trim()}`)
  }
  for (const args of [
    ['link', 'set', ServiceRouteInterface, 'up'],
    ['route', 'replace', cidr, 'dev', ServiceRouteInterface],
  ]) {
    const r = await ip(args)
    if (!r.ok) {
      await removeServiceRoute()
      throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`)
    }
  }
}

/** Deleting the interface deletes its route too. */
export async function removeServiceRoute(): Promise<void> {
  await ip(['link', 'del', ServiceRouteInterface])
}

/** The device `ip route get` picks for addr: what decides whether dialling addr stays here. */
export async function routeDevice(addr: string): Promise<string | undefined> {
  const r = await ip(['-o', 'route', 'get', addr])
  return r.ok ? /\bdev (\S+)/.exec(r.stdout)?.[1] : undefined
}
