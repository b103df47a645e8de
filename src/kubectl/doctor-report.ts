/**
 * What `kubectl vnode doctor` reports: the doctor service judges and the ui
 * prints, so neither imports the other. The one-line mode summary is shared
 * with `up`, which says it when its node starts.
 */

/** ok: this host and cluster give it; missing: they do not (the fix says how); off: turned off, by a flag or by default. */
export type Verdict = 'ok' | 'missing' | 'off'

/** Distribution families whose package names differ. */
export type Family = 'debian' | 'fedora' | 'arch'
export const Families: readonly Family[] = ['debian', 'fedora', 'arch']
export const FamilyNames: Record<Family, string> = {debian: 'Debian/Ubuntu', fedora: 'Fedora', arch: 'Arch'}

export type CapabilityId = 'cluster' | 'sandbox' | 'walls' | 'cgroups' | 'pod-network' | 'services' | 'metrics' | 'relay' | 'kubelet-endpoint' | 'kubelet-port'

export interface Fix {
  /** What to do, in words (run as root, a free port, ...). */
  text?: string
  /** The exact command, where it is the same everywhere. */
  command?: string
  /** The exact command per distribution family, where package names differ. */
  byFamily?: Partial<Record<Family, string>>
}

export interface DoctorCheck {
  id: CapabilityId
  capability: string
  verdict: Verdict
  /** What there is, or why not. */
  why: string
  /** What it costs to be without it, when it is not ok. */
  cost?: string
  fix?: Fix
  /** Asked for with a flag (e.g. --sandbox namespaces) and cannot work: doctor exits 1, and `up` would fail. */
  unmet?: boolean
}

export interface DoctorReport {
  host: {os: string; family?: Family; uid: number}
  /** Undefined with --host-only. */
  cluster?: {server?: string; context?: string; version?: string; reachable: boolean}
  checks: DoctorCheck[]
  /** The one-line summary of the mode `up` would run in (modeLine). */
  mode: string
  /** True when everything asked for can work (doctor exits 0). */
  ok: boolean
}

export interface ModeSummary {
  sandbox: string
  walls: string[]
  cgroups: string
  /** on, off, or why off. */
  podNetwork: string
}

/** `mode: sandbox namespaces, cgroups v1, pod network on; walls mount,pid,...`: what a pod on this node gets. */
export function modeLine(m: ModeSummary): string {
  return `mode: sandbox ${m.sandbox}, cgroups ${m.cgroups}, pod network ${m.podNetwork}; walls ${m.walls.join(',')}`
}
