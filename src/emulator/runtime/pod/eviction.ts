import type {V1Pod} from '@kubernetes/client-node'
import {lstat, readdir} from 'node:fs/promises'
import {join} from 'node:path'
import type {Clock} from '../../../common/clock.js'
import {parseQuantity} from '../../quantity.js'
import {layerWrittenDirs} from '../sandbox/container-view.js'

/**
 * Local ephemeral storage limits, as the kubelet's eviction manager enforces
 * them (localStorageEviction): an emptyDir over its sizeLimit, a pod over the
 * sum of its containers' `ephemeral-storage` limits, or a container over its
 * own limit is evicted: phase Failed, reason Evicted, a Warning event with
 * the same message, its containers killed with a 1 s grace.
 *
 * What counts: a container's writable layer (the upper directories of its
 * instance's overlays, sandbox/root-layer.ts: the kubelet's rootfs usage)
 * and its logs (its log directory, every instance, as the kubelet's
 * podContainerLogMetrics), and for the pod also its emptyDir volumes on disk
 * (medium Memory is RAM, and the kubelet leaves it out of the pod's total).
 * Without a sandbox a process has no layer: what it writes elsewhere on the
 * host is the host's, not the pod's.
 */

/** How often the limits are checked: the kubelet's eviction monitoring period. */
export const DefaultLocalStorageCheckMs = 10_000
/** The kubelet's immediateEvictionGracePeriodSeconds. */
export const EvictionGracePeriodSeconds = 1
/** The pod status reason of an eviction (the event's too: EventReason.Evicted). */
export const EvictedReason = 'Evicted'

/** Disk usage measured for one pod: bytes per emptyDir volume and per container's logs. */
export interface LocalStorageUsage {
  /** emptyDir volumes on disk (not medium Memory), by volume name. */
  emptyDirs: Map<string, number>
  /** Memory-medium emptyDirs, by name: they count against their own sizeLimit only. */
  memoryEmptyDirs: Map<string, number>
  /** Each container's logs, by container name. */
  logs: Map<string, number>
  /** Each container's writable layer, by container name. */
  layers: Map<string, number>
}

/** The pod declares something to enforce: otherwise it is never measured. */
export function hasLocalStorageLimits(pod: V1Pod): boolean {
  return emptyDirLimits(pod).length > 0 || containerLimits(pod).size > 0
}

function emptyDirLimits(pod: V1Pod): {name: string; limit: string}[] {
  return (pod.spec?.volumes ?? []).flatMap((v) => {
    const limit = v.emptyDir?.sizeLimit
    return limit !== undefined && parseQuantity(String(limit)) > 0 ? [{name: v.name, limit: String(limit)}] : []
  })
}

/** Regular containers' limits (resourcehelper.PodLimits sums these; init containers run before, one at a time). */
function containerLimits(pod: V1Pod): Map<string, string> {
  const out = new Map<string, string>()
  for (const c of pod.spec?.containers ?? []) {
    const limit = c.resources?.limits?.['ephemeral-storage']
    if (limit !== undefined && parseQuantity(String(limit)) > 0) out.set(c.name, String(limit))
  }
  return out
}

/**
 * The eviction message for the first limit exceeded, in the kubelet's order
 * (emptyDir, pod, container) and wording; undefined while every limit holds.
 */
export function localStorageViolation(pod: V1Pod, usage: LocalStorageUsage): string | undefined {
  for (const {name, limit} of emptyDirLimits(pod)) {
    const used = usage.emptyDirs.get(name) ?? usage.memoryEmptyDirs.get(name)
    if (used !== undefined && used > parseQuantity(limit)) return `Usage of EmptyDir volume "${name}" exceeds the limit "${canonicalQuantity(limit)}". `
  }
  const limits = containerLimits(pod)
  if (limits.size > 0) {
    const podLimit = [...limits.values()].reduce((sum, l) => sum + parseQuantity(l), 0)
    const podUsed = sum(usage.emptyDirs.values()) + sum(usage.logs.values()) + sum(usage.layers.values())
    if (podUsed > podLimit) return `Pod ephemeral local storage usage exceeds the total limit of containers ${canonicalBytes(podLimit, isBinary([...limits.values()][0]))}. `
  }
  for (const [name, limit] of limits) {
    if ((usage.logs.get(name) ?? 0) + (usage.layers.get(name) ?? 0) > parseQuantity(limit)) return `Container ${name} exceeded its local ephemeral storage limit "${canonicalQuantity(limit)}". `
  }
  return undefined
}

const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0)

const isBinary = (q: string) => /[KMGTPE]i$/.test(q.trim())

/** A quantity as resource.Quantity's String() writes it: "2048Ki" is "2Mi", "1000" is "1k". */
export function canonicalQuantity(q: string): string {
  return canonicalBytes(parseQuantity(q), isBinary(q))
}

function canonicalBytes(bytes: number, binary: boolean): string {
  if (!Number.isInteger(bytes) || bytes === 0) return String(bytes)
  const [base, suffixes] = binary ? [1024, ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei']] : [1000, ['', 'k', 'M', 'G', 'T', 'P', 'E']]
  let n = bytes
  let i = 0
  while (i < suffixes.length - 1 && n % base === 0) {
    n /= base
    i++
  }
  return `${n}${suffixes[i]}`
}

/** What a pod uses that counts against its limits: its emptyDirs (by medium), its containers' log directories and writable layers. */
export async function podLocalStorageUsage(
  pod: V1Pod,
  volumes: ReadonlyMap<string, {path?: string}> | undefined,
  logDir: (container: string) => string,
  layerDir: (container: string) => string = () => '',
): Promise<LocalStorageUsage> {
  const usage: LocalStorageUsage = {emptyDirs: new Map(), memoryEmptyDirs: new Map(), logs: new Map(), layers: new Map()}
  for (const v of pod.spec?.volumes ?? []) {
    const dir = v.emptyDir && volumes?.get(v.name)?.path
    if (dir) (v.emptyDir!.medium === 'Memory' ? usage.memoryEmptyDirs : usage.emptyDirs).set(v.name, await diskUsage(dir))
  }
  for (const c of pod.spec?.containers ?? []) {
    usage.logs.set(c.name, await diskUsage(logDir(c.name)))
    const layer = layerDir(c.name)
    let written = 0
    for (const d of layer ? layerWrittenDirs(layer) : []) written += await diskUsage(d)
    usage.layers.set(c.name, written)
  }
  return usage
}

/**
 * What `du` says of a tree: allocated blocks of every file and directory,
 * symlinks not followed, each inode once. A tree that is gone is 0.
 */
export async function diskUsage(path: string): Promise<number> {
  const seen = new Set<string>()
  const walk = async (p: string): Promise<number> => {
    let st
    try {
      st = await lstat(p, {bigint: false})
    } catch {
      return 0
    }
    const key = `${st.dev}:${st.ino}`
    if (seen.has(key)) return 0
    seen.add(key)
    let bytes = st.blocks * 512
    if (st.isDirectory()) {
      const names = await readdir(p).catch(() => [] as string[])
      for (const name of names) bytes += await walk(join(p, name))
    }
    return bytes
  }
  return walk(path)
}

/** One pod's local storage check: every DefaultLocalStorageCheckMs, for a pod that has limits. */
export class LocalStorageCheck {
  private nextAt = 0

  constructor(private readonly clock: Clock) {}

  /** The message of a limit the pod is over now, if it is; wake is told when the next check is due. */
  async check(
    pod: V1Pod,
    volumes: ReadonlyMap<string, {path?: string}> | undefined,
    logDir: (container: string) => string,
    layerDir: (container: string) => string,
    wake: (at: number) => void,
  ): Promise<string | undefined> {
    if (!hasLocalStorageLimits(pod)) return undefined
    if (this.clock.now() < this.nextAt) return void wake(this.nextAt)
    this.nextAt = this.clock.now() + DefaultLocalStorageCheckMs
    wake(this.nextAt)
    return localStorageViolation(pod, await podLocalStorageUsage(pod, volumes, logDir, layerDir))
  }
}
