import {networkInterfaces} from 'node:os'
import {ServiceRoutePrefix} from '../common/service-route.js'

/** Non-loopback, non-link-local IPv4 addresses of this host, primary first; not the local clusters' own devices' (their API addresses). */
export function hostAddresses(): string[] {
  const out: string[] = []
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (name.startsWith(ServiceRoutePrefix)) continue
    for (const a of addrs ?? []) {
      if (a.family !== 'IPv4' || a.internal || a.address.startsWith('169.254.')) continue
      out.push(a.address)
    }
  }
  return out
}
