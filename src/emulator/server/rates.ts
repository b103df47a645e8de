/**
 * CPU rates (usageNanoCores) from two readings of a cumulative counter, as
 * the kubelet derives them from cAdvisor's samples. One reading is kept per
 * key and keys not seen in a round are dropped, so memory stays bounded.
 */
export class CpuRates {
  private readonly last = new Map<string, {nanoSeconds: number; atMs: number}>()

  /** Shorter intervals give noisy rates: keep the older reading until this much time has passed. */
  constructor(readonly minIntervalMs = 1000) {}

  /**
   * The rate since the previous reading, or, for a first reading, the average
   * since start when known; undefined when neither is available.
   */
  rate(key: string, nanoSeconds: number, atMs: number, startMs?: number): number | undefined {
    const prev = this.last.get(key)
    let rate: number | undefined
    if (prev && atMs > prev.atMs && nanoSeconds >= prev.nanoSeconds) {
      rate = ((nanoSeconds - prev.nanoSeconds) / (atMs - prev.atMs)) * 1e3
    } else if (startMs !== undefined && atMs > startMs) {
      rate = (nanoSeconds / (atMs - startMs)) * 1e3
    }
    if (!prev || atMs - prev.atMs >= this.minIntervalMs || nanoSeconds < prev.nanoSeconds) this.last.set(key, {nanoSeconds, atMs})
    return rate === undefined ? undefined : Math.round(rate)
  }

  /** Forgets every key not in keep. */
  retain(keep: Set<string>): void {
    for (const k of this.last.keys()) if (!keep.has(k)) this.last.delete(k)
  }

  get size(): number {
    return this.last.size
  }
}
