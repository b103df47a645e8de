// Normalisation and comparison: what the suite compares, field by field, and
// what it leaves out because it differs by nature (times, uids, ids, IPs, names).
export const DefaultTimingToleranceMs = 8_000
export const DefaultStartToleranceMs = 5_000
export const DefaultGoneToleranceMs = 5_000
/** Seconds after creation at which both nodes' pods are compared. */
export const DefaultSampleSeconds = [3, 6, 10, 15, 20, 30, 40, 50]

const Uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
const Hex64 = /\b[0-9a-f]{64}\b/g
const Ipv4 = /\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b/g
const IsoTime = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g

/** Text with the things that differ by nature replaced by placeholders. */
export function normaliseText(text, ctx) {
  if (typeof text !== 'string') return text
  let t = text.replace(Uuid, '<uid>').replace(Hex64, '<id>').replace(IsoTime, '<time>').replace(Ipv4, '<ip>')
  for (const [from, to] of ctx.names) t = t.split(from).join(to)
  return t
}

function state(s, ctx) {
  if (!s) return undefined
  const [kind, v] = Object.entries(s)[0] ?? []
  if (!kind) return {}
  const out = {kind}
  for (const f of ['reason', 'exitCode', 'signal', 'message']) if (v?.[f] !== undefined) out[f] = normaliseText(v[f], ctx)
  return out
}

function container(cs, ctx) {
  return {
    state: state(cs.state, ctx),
    lastState: state(cs.lastState, ctx),
    ready: cs.ready,
    started: cs.started,
    restartCount: cs.restartCount,
    image: cs.image,
    imageID: cs.imageID ? '<set>' : undefined,
    containerID: cs.containerID ? '<set>' : undefined,
    resources: cs.resources,
    allocatedResources: cs.allocatedResources,
    volumeMounts: cs.volumeMounts?.map((m) => ({...m, name: normaliseText(m.name.replace(/-[a-z0-9]{5}$/, '-<x>'), ctx)})),
  }
}

/** A pod's status, normalised, as one flat map of path -> JSON value. */
export function normalisePod(pod, ctx) {
  const s = pod.status ?? {}
  const doc = {
    phase: s.phase,
    reason: s.reason,
    message: normaliseText(s.message, ctx),
    observedGeneration: s.observedGeneration,
    qosClass: s.qosClass,
    hostIP: s.hostIP ? '<set>' : undefined,
    podIP: s.podIP ? '<set>' : undefined,
    podIPs: s.podIPs?.length,
    startTime: s.startTime ? '<set>' : undefined,
    deleting: pod.metadata?.deletionTimestamp ? true : undefined,
    conditions: Object.fromEntries((s.conditions ?? []).map((c) => [c.type, {status: c.status, reason: c.reason, message: normaliseText(c.message, ctx), observedGeneration: c.observedGeneration}])),
    initContainerStatuses: Object.fromEntries((s.initContainerStatuses ?? []).map((cs) => [cs.name, container(cs, ctx)])),
    containerStatuses: Object.fromEntries((s.containerStatuses ?? []).map((cs) => [cs.name, container(cs, ctx)])),
  }
  return flatten(doc)
}

export function flatten(value, prefix = '', out = {}) {
  if (value === undefined) return out
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out)
    return out
  }
  out[prefix] = JSON.stringify(value)
  return out
}

/** The paths at which two flat maps differ. */
export function diffPaths(a, b) {
  const paths = new Set([...Object.keys(a), ...Object.keys(b)])
  return [...paths].filter((p) => a[p] !== b[p]).sort()
}

/** The state of a timeline (sorted [{t, flat}]) at time t: the last one at or before t. */
export function stateAt(timeline, t) {
  let found
  for (const s of timeline) {
    if (s.t <= t) found = s
    else break
  }
  return found
}

/** The states a timeline holds at any moment in [from, to]. */
function statesWithin(timeline, from, to) {
  const out = []
  for (let i = 0; i < timeline.length; i++) {
    const end = i + 1 < timeline.length ? timeline[i + 1].t : Infinity
    if (timeline[i].t <= to && end >= from) out.push(timeline[i])
  }
  return out
}

const same = (a, b) => diffPaths(a, b).length === 0

/**
 * Compares two timelines at the sample times: a sample matches when the
 * other node shows the same state at some moment within the tolerance. For a
 * sample that matches nowhere, the paths where it differs from the other node's
 * state at that very time are the differences.
 */
export function compareTimelines(ref, vn, sampleMs, toleranceMs) {
  const diffs = []
  for (const t of sampleMs) {
    for (const [mine, other, who] of [
      [vn, ref, 'vnode'],
      [ref, vn, 'kubelet'],
    ]) {
      const s = stateAt(mine, t)
      if (!s) continue
      if (statesWithin(other, t - toleranceMs, t + toleranceMs).some((o) => same(o.flat, s.flat))) continue
      const o = stateAt(other, t)
      const paths = o ? diffPaths(o.flat, s.flat) : ['<no status>']
      for (const p of paths) diffs.push({at: t, seenOn: who, path: p, kubelet: who === 'vnode' ? o?.flat[p] : s.flat[p], vnode: who === 'vnode' ? s.flat[p] : o?.flat[p]})
    }
  }
  // One line per path, with the first sample where it showed.
  const byPath = new Map()
  for (const d of diffs) if (!byPath.has(d.path)) byPath.set(d.path, d)
  return [...byPath.values()]
}

/** The event sequence: unique (type, reason, message) in order of first arrival, with counts. */
export function eventSequence(events, ctx) {
  const seq = new Map()
  for (const e of events) {
    const key = `${e.type}/${e.reason}: ${normaliseText(e.note ?? e.message ?? '', ctx)}`
    const count = e.count ?? e.series?.count ?? 1
    seq.set(key, Math.max(seq.get(key) ?? 0, count))
  }
  return [...seq.entries()].map(([key, count]) => ({key, count}))
}

/** Event differences: missing or extra events, counts beyond one apart, and order. */
export function compareEvents(ref, vn) {
  const diffs = []
  const r = new Map(ref.map((e) => [e.key, e.count]))
  const v = new Map(vn.map((e) => [e.key, e.count]))
  for (const [k, n] of r) if (!v.has(k)) diffs.push({path: `event-missing ${k}`, kubelet: n, vnode: 0})
  for (const [k, n] of v) if (!r.has(k)) diffs.push({path: `event-extra ${k}`, kubelet: 0, vnode: n})
  // Counts grow with time: one apart is within the timing tolerance.
  for (const [k, n] of r) if (v.has(k) && Math.abs(v.get(k) - n) > 1) diffs.push({path: `event-count ${k}`, kubelet: n, vnode: v.get(k)})
  const common = (seq, other) => seq.map((e) => e.key).filter((k) => other.has(k))
  const ro = common(ref, v)
  const vo = common(vn, r)
  if (ro.join('\n') !== vo.join('\n')) diffs.push({path: 'event-order', kubelet: ro.join(' | '), vnode: vo.join(' | ')})
  return diffs
}

/** Timing differences beyond tolerance: first Running, first Ready, delete to gone. */
export function compareTimes(ref, vn, opts) {
  const diffs = []
  for (const [name, tol] of [
    ['running', opts.startToleranceMs],
    ['ready', opts.startToleranceMs],
    ['gone', opts.goneToleranceMs],
  ]) {
    const a = ref[name]
    const b = vn[name]
    if (a === undefined && b === undefined) continue
    if (a === undefined || b === undefined || Math.abs(a - b) > tol) diffs.push({path: `time ${name}`, kubelet: a, vnode: b})
  }
  return diffs
}

export function globMatch(pattern, text) {
  // `*` matches anything, line breaks too (probe output keeps its newline).
  const re = new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*')}$`,
  )
  return re.test(text)
}

/** The documented difference that covers a difference of a spec, if any. */
export function documented(differences, spec, path) {
  return differences.find((d) => (d.specs ?? ['*']).some((s) => globMatch(s, spec)) && d.paths.some((p) => globMatch(p, path)))
}
