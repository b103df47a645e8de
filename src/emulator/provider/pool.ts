/**
 * The warm pool of pod sandboxes as the rest of the node reads it (the
 * kubelet API's /metrics, the dashboard's header): one contract. A node
 * without a pool (no pod network) reports none.
 */
export interface SandboxPoolFigures {
  /** Entries ready to be leased now. */
  ready: number
  /** Entries being made (off the start path). */
  making: number
  /** What the pool is sized to now, from the recent start rate. */
  target: number
  floor: number
  cap: number
  /** Pod starts that took a ready entry, since the node started. */
  hits: number
  /** Pod starts that found the pool empty and set their sandbox up themselves. */
  misses: number
  /** Entries that could not be made. */
  failures: number
  /** Entries found unusable at lease (their namespace removed behind vnode's back), destroyed. */
  broken: number
}
