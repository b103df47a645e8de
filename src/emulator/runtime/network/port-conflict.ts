import type {V1ContainerPort} from '@kubernetes/client-node'
import {readdir, readFile, readlink} from 'node:fs/promises'

/**
 * Without a pod network every pod shares the host's ports, so two replicas
 * of a server on one fixed port cannot both run: the second one's bind
 * fails. vnode says so before it starts the container: which declared
 * containerPort is taken, and by which pod (or process).
 */

export interface PortHolder {
  port: number
  pid?: number
  /** The holder's command name from /proc/<pid>/comm. */
  comm?: string
}

/** Socket inodes of TCP listeners by local port, from /proc/net/tcp and tcp6. */
async function listeners(): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>()
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '')
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; the inode is field 10.
      if (f.length < 10 || f[3] !== '0A') continue
      const port = parseInt(f[1].split(':').at(-1)!, 16)
      out.set(port, [...(out.get(port) ?? []), f[9]])
    }
  }
  return out
}

/** The pid of a process holding one of the socket inodes (a walk over /proc/<pid>/fd: done only on a conflict). */
async function socketOwner(inodes: string[]): Promise<number | undefined> {
  const wanted = new Set(inodes.map((i) => `socket:[${i}]`))
  for (const d of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(d)) continue
    const fds = await readdir(`/proc/${d}/fd`).catch(() => [] as string[])
    for (const fd of fds) {
      if (wanted.has(await readlink(`/proc/${d}/fd/${fd}`).catch(() => ''))) return Number(d)
    }
  }
  return undefined
}

/** Each of ports that a TCP listener on this host (its network namespace) already holds. */
export async function takenPorts(ports: number[]): Promise<PortHolder[]> {
  if (ports.length === 0) return []
  const l = await listeners()
  const out: PortHolder[] = []
  for (const port of ports) {
    const inodes = l.get(port)
    if (!inodes) continue
    const pid = await socketOwner(inodes)
    const comm = pid ? (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() || undefined : undefined
    out.push({port, pid, comm})
  }
  return out
}

/** The process group of pid (field 5 of /proc/<pid>/stat). */
export async function processGroupOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')
  const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
  return Number.isFinite(pgrp) && pgrp > 0 ? pgrp : undefined
}

/**
 * The PortInUse Warning: which port, held by whom, and advice that fits the
 * pod: hostPort only when the container does not declare it already (then
 * the scheduler already keeps such replicas apart on one node, and the
 * holder is something else), and the pod network (why it is off, and how to
 * turn it on), which gives every pod its own ports.
 */
export function portConflictMessage(port: number, holder: string, ports: readonly V1ContainerPort[] = [], hostNetworkReason?: string): string {
  const declaresHostPort = ports.some((p) => p.containerPort === port && p.hostPort)
  const base = `containerPort ${port}/TCP is already in use on this host by ${holder}; pods share the host's network here, so this container cannot bind it.`
  const network = hostNetworkReason
    ? ` The pod network (a network namespace and address per pod) is off on this node: ${hostNetworkReason}; with it on (kubectl vnode up --pod-network on, as root) replicas do not share ports.`
    : ' With the pod network (kubectl vnode up --pod-network on, as root) every pod has ports of its own.'
  const hostPort = declaresHostPort ? '' : ` Or declare hostPort: ${port} to let the scheduler keep such replicas on different nodes.`
  return base + network + hostPort
}
