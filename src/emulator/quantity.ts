/**
 * Kubernetes resource quantities (`100m`, `1.5`, `512Mi`, `1G`, `1e3`) to numbers.
 * Only what node capacity and pod requests use; anything else is an InvalidInput error.
 */
const Suffixes: Record<string, number> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
}

const QuantityPattern = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/

export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') return q
  const m = QuantityPattern.exec(q.trim())
  if (!m || Number.isNaN(Number(m[1]))) throw new RangeError(`invalid quantity "${q}"`)
  return Number(m[1]) * Suffixes[m[2] ?? '']
}

/** CPU cores to the canonical string: whole cores as "2", fractions in millicores. */
export function formatCpu(cores: number): string {
  const milli = Math.round(cores * 1000)
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`
}

/** Bytes as Ki, which the kubelet uses for memory and storage. */
export function formatBytes(bytes: number): string {
  return `${Math.max(0, Math.floor(bytes / 1024))}Ki`
}
