import {readFileSync, statfsSync} from 'node:fs'
import {arch, cpus, hostname, networkInterfaces, release, totalmem} from 'node:os'
import {ServiceRoutePrefix} from '../../common/service-route.js'

/** One reading of this host's resources, the input of node capacity and pressure conditions. */
export interface HostReading {
  cpuCores: number
  memoryTotalBytes: number
  memoryAvailableBytes: number
  diskTotalBytes: number
  diskAvailableBytes: number
  pidMax: number
  processes: number
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    return undefined
  }
}

function memAvailable(): number {
  const meminfo = readText('/proc/meminfo') ?? ''
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo)
  return m ? Number(m[1]) * 1024 : 0
}

function processCount(): number {
  // /proc/loadavg: "0.1 0.2 0.3 running/total lastpid"
  const total = (readText('/proc/loadavg') ?? '').split(' ')[3]?.split('/')[1]
  return Number(total) || 0
}

export function readHost(stateDir: string): HostReading {
  let diskTotal = 0
  let diskAvail = 0
  try {
    const fs = statfsSync(stateDir)
    diskTotal = fs.blocks * fs.bsize
    diskAvail = fs.bavail * fs.bsize
  } catch {
    /* state dir not yet created: report zero, which the node shows as disk pressure */
  }
  return {
    cpuCores: cpus().length,
    memoryTotalBytes: totalmem(),
    memoryAvailableBytes: memAvailable(),
    diskTotalBytes: diskTotal,
    diskAvailableBytes: diskAvail,
    pidMax: Number(readText('/proc/sys/kernel/pid_max')) || 32768,
    processes: processCount(),
  }
}

export interface HostIdentity {
  hostname: string
  machineID: string
  bootID: string
  systemUUID: string
  kernelVersion: string
  osImage: string
  operatingSystem: string
  architecture: string
}

const GoArch: Record<string, string> = {x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x'}

export function goArch(): string {
  return GoArch[arch()] ?? arch()
}

export function hostIdentity(): HostIdentity {
  const osRelease = readText('/etc/os-release') ?? ''
  const pretty = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(osRelease)?.[1]
  return {
    hostname: hostname(),
    machineID: readText('/etc/machine-id') ?? '',
    bootID: readText('/proc/sys/kernel/random/boot_id') ?? '',
    systemUUID: readText('/sys/class/dmi/id/product_uuid') ?? '',
    kernelVersion: release(),
    osImage: pretty ?? 'Unknown',
    operatingSystem: process.platform,
    architecture: goArch(),
  }
}

function isUsable(addr: string): boolean {
  return !addr.startsWith('127.') && !addr.startsWith('169.254.') && addr !== '0.0.0.0'
}

/** The host's primary non-loopback IPv4 address (the first one of the first interface that has one). */
export function primaryAddress(): string | undefined {
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    // A local cluster's own device: its address is the API server's, not the host's.
    if (name.startsWith(ServiceRoutePrefix)) continue
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal && isUsable(a.address)) return a.address
  }
  return undefined
}
