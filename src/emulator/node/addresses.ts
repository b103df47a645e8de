import {createSocket} from 'node:dgram'
import {isIP} from 'node:net'
import {primaryAddress} from './host.js'

function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1' || host === '[::1]'
}

/** The local address the kernel would use to reach host (a UDP connect sends nothing). */
function localAddressTowards(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const sock = createSocket(isIP(host) === 6 ? 'udp6' : 'udp4')
    sock.on('error', () => {
      sock.close()
      resolve(undefined)
    })
    sock.connect(port, host, () => {
      const addr = sock.address().address
      sock.close()
      resolve(addr)
    })
  })
}

/**
 * The node's InternalIP: an address of this host the API server can reach and
 * proxy to. The API server refuses to proxy to loopback node addresses, so for
 * a server on loopback or on an address of this host the host's primary address is used; for a remote one,
 * the local address of the route towards it (the bridge side for kind).
 */
export async function chooseNodeIP(server: string, override?: string): Promise<string> {
  if (override) return override
  const url = new URL(server)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (!isLoopback(host)) {
    const port = Number(url.port) || 443
    const local = await localAddressTowards(host, port)
    // local === host: the server is on an address of this host (the local control plane's own device).
    if (local && !isLoopback(local) && local !== host) return local
  }
  return primaryAddress() ?? '127.0.0.1'
}
