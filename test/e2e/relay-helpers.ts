import {execFileSync} from 'node:child_process'
import {connect, createServer} from 'node:net'

/** What the relay tests need of this host, and the firewall they put between the API server and a node. */

export function hasPython(): boolean {
  try {
    execFileSync('python3', ['-c', 'import asyncio'], {stdio: 'ignore'})
    return true
  } catch {
    return false
  }
}
export const python = hasPython()
export const hasBwrap = (() => {
  try {
    execFileSync('bwrap', ['--version'], {stdio: 'ignore'})
    return process.getuid?.() === 0
  } catch {
    return false
  }
})()
export const hasIptables = (() => {
  try {
    execFileSync('iptables', ['-w', '-S', 'INPUT'], {stdio: 'ignore'})
    return true
  } catch {
    return false
  }
})()
export function freePort(host = '0.0.0.0'): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, host, () => {
      const port = (s.address() as {port: number}).port
      s.close(() => resolve(port))
    })
  })
}

/** How a TCP connect to host:port ends: 'connected' or the error code. */
export function dial(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({host, port, timeout: 3000})
    s.once('connect', () => {
      s.destroy()
      resolve('connected')
    })
    s.once('timeout', () => {
      s.destroy()
      resolve('ETIMEDOUT')
    })
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
  })
}

/**
 * An iptables rule that resets TCP connections to addr:port, the way a
 * firewall or NAT in front of a laptop keeps the API server out; loopback
 * (where the tunnels join vnode's kubelet server) is not matched.
 */
export class Reject {
  private readonly rule: string[]
  active = false

  constructor(addr: string, port: number, tag: string) {
    this.rule = ['INPUT', '-p', 'tcp', '-d', addr, '--dport', String(port), '-m', 'comment', '--comment', tag, '-j', 'REJECT', '--reject-with', 'tcp-reset']
  }

  add(): void {
    execFileSync('iptables', ['-w', '-I', ...this.rule])
    this.active = true
  }

  remove(): void {
    if (!this.active) return
    execFileSync('iptables', ['-w', '-D', ...this.rule])
    this.active = false
  }
}

/** `up`'s flags for a node behind a relay pod in relayNs, on the node labelled relay-host=host. */
export function relayFlags(relayNs: string, relayPort: number, tunnelPort: number, host: string): string[] {
  return ['--relay', 'on', '--relay-namespace', relayNs, '--relay-port', String(relayPort), '--relay-tunnel-port', String(tunnelPort), '--relay-node-selector', `relay-host=${host}`]
}
