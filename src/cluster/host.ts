import {networkInterfaces} from 'node:os'

/** Non-loopback, non-link-local IPv4 addresses of this host, primary first. */
export function hostAddresses(): string[] {
  const out: string[] = []
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.family !== 'IPv4' || a.internal || a.address.startsWith('169.254.')) continue
      out.push(a.address)
    }
  }
  return out
}
