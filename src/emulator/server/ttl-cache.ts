/**
 * A bounded cache of decisions with a time to live per entry. Expired entries
 * are dropped on access and swept on insert; past maxEntries the oldest entry
 * goes, so the map never grows without bound.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, {value: V; expires: number}>()

  constructor(
    readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size
  }

  get(key: string): V | undefined {
    const e = this.entries.get(key)
    if (!e) return undefined
    if (e.expires <= this.now()) {
      this.entries.delete(key)
      return undefined
    }
    return e.value
  }

  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return
    const now = this.now()
    this.entries.delete(key)
    if (this.entries.size >= this.maxEntries) {
      for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k)
    }
    // Maps iterate in insertion order: the first key is the oldest.
    while (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, {value, expires: now + ttlMs})
  }

  clear(): void {
    this.entries.clear()
  }
}
