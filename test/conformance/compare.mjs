// Normalisation and comparison: what the suite compares, field by field, and
// what it leaves out because it differs by nature (times, uids, ids, IPs, names).
// Pure: it works on a recording (run.mjs makes one; `node compare.mjs
// recording.json` compares a saved one again), so the rules can be changed and
// checked without running the nodes.

/** A sample matches when the other node shows the same state this close in time (before the load factor). */
export const DefaultTimingToleranceMs = 8_000
/** The sample tolerance never grows past this: beyond it two samples would blur into one. */
export const MaxTimingToleranceMs = 15_000
/** First Running / Ready from creation, and delete call to gone, within these (before the load factor). */
export const DefaultStartToleranceMs = 5_000
export const DefaultGoneToleranceMs = 5_000
/** Seconds after the first container start at which both nodes' pods are compared. */
export const DefaultSampleSeconds = [3, 6, 10, 15, 20, 30, 40, 50]
/** Seconds after the delete call at which both nodes' pods are compared again. */
export const DefaultDeleteSampleSeconds = [1, 3, 6, 10]
/**
 * A Ready condition counts as the pod's time to Ready once it held this long
 * (times the load factor, up to MaxReadyHoldMs): a Ready of a moment, written on one node's sync
 * and not on the other's (a container that ends within a second), is a
 * sampling accident; a Ready that lasts is a time to compare.
 */
export const DefaultReadyHoldMs = 3_000
/** The hold grows with the load up to this: a container that lives for a second stays out, any longer one counts. */
export const MaxReadyHoldMs = 5_000

/** Ready on one node only counts as a difference when it held this long there (a steady Ready against none). */
export const SteadyReadyMs = 10_000

/** The time to Ready: the start of the first Ready span that lasted. */
export function readyTime(spans, holdMs) {
  return spans.find(([from, to]) => to - from >= holdMs)?.[0]
}

/**
 * Both nodes' times to Ready. A Ready that lasted on one node and never on the
 * other is compared only when it was steady (SteadyReadyMs): a few seconds of
 * Ready around a container's end or a deadline are the status samples' to
 * compare, not a time to Ready.
 */
export function readyTimes(kSpans, vSpans, holdMs) {
  const k = readyTime(kSpans, holdMs)
  const v = readyTime(vSpans, holdMs)
  if ((k === undefined) === (v === undefined)) return [k, v]
  const [spans, t] = k === undefined ? [vSpans, v] : [kSpans, k]
  const span = spans.find(([from]) => from === t)
  return span[1] - span[0] >= SteadyReadyMs ? [k, v] : [undefined, undefined]
}
/** Post-delete states are placed from this offset on, counted from the delete call. */
export const DeletePhaseOffsetMs = 1_000_000

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
 * state at that very time are the differences: one per path and sample, so an
 * excuse for the first seconds cannot cover the same path at a later sample.
 */
export function compareTimelines(ref, vn, sampleMs, toleranceMs) {
  const diffs = new Map()
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
      for (const p of paths) {
        const key = `${t} ${p}`
        if (!diffs.has(key)) diffs.set(key, {at: t, seenOn: who, path: p, kubelet: who === 'vnode' ? o?.flat[p] : s.flat[p], vnode: who === 'vnode' ? s.flat[p] : o?.flat[p]})
      }
    }
  }
  return [...diffs.values()]
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
  // A count one apart is one sync apart: both clocks tick on their own.
  for (const [k, n] of r) if (v.has(k) && Math.abs(v.get(k) - n) > 1) diffs.push({path: `event-count ${k}`, kubelet: n, vnode: v.get(k)})
  // The kubelet stops a pod's containers in parallel (one goroutine each, killContainersWithSyncResult), so
  // the order of their Killing events among themselves is nobody's: a run of them compares as a set.
  const common = (seq, other) => groupKilling(seq.map((e) => e.key).filter((k) => other.has(k)))
  const ro = common(ref, v)
  const vo = common(vn, r)
  if (ro.join('\n') !== vo.join('\n')) diffs.push({path: 'event-order', kubelet: ro.join(' | '), vnode: vo.join(' | ')})
  return diffs
}

function groupKilling(keys) {
  const out = []
  for (const k of keys) {
    const killing = k.startsWith('Normal/Killing: ')
    if (killing && Array.isArray(out.at(-1))) out.at(-1).push(k)
    else out.push(killing ? [k] : k)
  }
  return out.map((x) => (Array.isArray(x) ? x.sort().join(' & ') : x))
}

/**
 * Timing differences beyond tolerance: first Running, first Ready, delete to
 * gone. Never excused: the tolerance grows with the load measured during the
 * spec (opts.factor), and a pod that never goes is a failure, not a timing.
 */
export function compareTimes(ref, vn, opts) {
  const diffs = []
  const f = opts.factor ?? 1
  for (const [name, tol] of [
    ['running', opts.startToleranceMs * f],
    ['ready', opts.startToleranceMs * f],
    ['gone', opts.goneToleranceMs * f],
  ]) {
    const a = ref[name]
    const b = vn[name]
    if (a === undefined && b === undefined) continue
    if (a === undefined || b === undefined || Math.abs(a - b) > tol) diffs.push({path: `time ${name}`, kubelet: a, vnode: b, tolerance: Math.round(tol)})
  }
  return diffs
}

/** The fields of each container's last state that say how it ended: compared as values, whatever the timing. */
const TerminationField = /^(initContainerStatuses|containerStatuses)\.[^.]+\.state\.(kind|reason|exitCode|signal)$/

/** Termination: each container's final state (its kind, reason, exit code, signal) on the pod's last record. */
export function compareTermination(refFinal, vnFinal) {
  if (!refFinal || !vnFinal) return []
  const pick = (flat) => Object.fromEntries(Object.entries(flat).filter(([p]) => TerminationField.test(p)))
  const a = pick(refFinal)
  const b = pick(vnFinal)
  return diffPaths(a, b).map((p) => ({path: `termination ${p}`, kubelet: a[p], vnode: b[p]}))
}

/** Content: what each container a spec names wrote, on both nodes, against what the spec says it must be. */
export function compareContent(expected, refLogs, vnLogs) {
  const diffs = []
  for (const [c, want] of Object.entries(expected ?? {})) {
    const text = (logs) => (logs?.[c] === undefined ? '<not read>' : (logs[c].text ?? `<error: ${logs[c].error}>`))
    const k = text(refLogs)
    const v = text(vnLogs)
    if (k !== want || v !== want) diffs.push({path: `content logs.${c}`, kubelet: k, vnode: v, expected: want})
  }
  return diffs
}

/** The load factor of a stretch of the run: the highest 1-minute load per CPU seen in it, at least 1. */
export function loadFactor(samples, cpus, from, to) {
  // The 1-minute average trails: a sample up to a minute after the stretch still speaks of it.
  const within = (samples ?? []).filter((s) => s.at >= from - 5_000 && s.at <= to + 60_000).map((s) => s.load1)
  if (within.length === 0 || !cpus) return 1
  return Math.max(1, Math.max(...within) / cpus)
}

export function globMatch(pattern, text) {
  // `*` matches anything, line breaks too (probe output keeps its newline).
  const re = new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*')}$`,
  )
  return re.test(String(text))
}

/** Paths no entry may cover: they are compared with a tolerance, or a failure to run, or must name a field. */
const Unexcusable = [/^time /, /^run /]
const Blanket = /^(status|status-deleting|termination|content|event-missing|event-extra|event-count) \*$|^\*$/

/**
 * Checks the entries of differences.json: each names its specs and its field
 * paths (no blanket `status *`), a status path has a sample window, and no
 * entry covers timing or a failure to run. Throws with every problem found.
 */
export function validateDifferences(differences) {
  const problems = []
  const ids = new Set()
  for (const d of differences) {
    const who = d.id ?? '(no id)'
    if (!d.id) problems.push('an entry has no id')
    if (ids.has(d.id)) problems.push(`${who}: id used twice`)
    ids.add(d.id)
    if (!d.reason) problems.push(`${who}: no reason`)
    if (!['by nature', 'not yet fixed'].includes(d.kind)) problems.push(`${who}: kind must be "by nature" or "not yet fixed"`)
    if (!Array.isArray(d.specs) || d.specs.length === 0 || d.specs.includes('*')) problems.push(`${who}: specs must name specs (no "*")`)
    if (!Array.isArray(d.paths) || d.paths.length === 0) problems.push(`${who}: no paths`)
    for (const p of d.paths ?? []) {
      if (Blanket.test(p)) problems.push(`${who}: "${p}" is a blanket path: name the fields`)
      if (Unexcusable.some((re) => re.test(p))) problems.push(`${who}: "${p}" cannot be excused (timing is compared within a load-scaled tolerance; a failure to run fails)`)
      if (/^status(-deleting)? /.test(p) && !d.window) problems.push(`${who}: "${p}" needs a window (the samples it covers)`)
    }
    for (const w of [d.window ?? []].flat()) {
      if (!['create', 'delete'].includes(w.phase) || !(w.from >= 0) || !(w.to >= w.from)) problems.push(`${who}: a window is {phase: create|delete, from, to} in seconds`)
    }
    const relation = (v) => v.within !== undefined || Array.isArray(v.pairs)
    if (d.values?.byPath) {
      for (const [glob, v] of Object.entries(d.values.byPath)) {
        if (!relation(v)) problems.push(`${who}: values.byPath["${glob}"] must be {within: N} or {pairs: [...]}`)
        if (!d.paths?.some((p) => p === glob)) problems.push(`${who}: values.byPath["${glob}"] names no path of the entry`)
      }
    } else if (d.values && !relation(d.values)) problems.push(`${who}: values must be {within: N}, {pairs: [[kubelet, vnode], ...]} or {byPath: {path: ...}}`)
  }
  if (problems.length > 0) throw new Error(`differences.json: ${problems.join('; ')}`)
  return differences
}

/**
 * Does a value relation hold for a difference? {within: N}: numbers at most N
 * apart; {pairs}: one pair (globs) matches; {byPath: {path: relation}}: the
 * relation of the entry's path that matched (a path without one has none).
 */
function valuesAllowed(values, d, path) {
  if (values?.byPath) return valuesAllowed(values.byPath[path], d)
  if (!values) return true
  if (values.within !== undefined) {
    const a = Number(d.kubelet)
    const b = Number(d.vnode)
    return Number.isFinite(a) && Number.isFinite(b) && Math.abs(a - b) <= values.within
  }
  return values.pairs.some(([k, v]) => globMatch(k, d.kubelet ?? '<none>') && globMatch(v, d.vnode ?? '<none>'))
}

/**
 * Is a difference inside one of an entry's windows (one, or a list: the
 * seconds after the first container start, or after the delete call)? Only
 * status samples have a time: the rest (events, termination, content) have
 * none to check.
 */
function inWindow(window, d) {
  if (d.at === undefined) return true
  const deleting = d.path.startsWith('status-deleting ')
  const s = d.at / 1000
  return [window ?? []].flat().some((w) => (w.phase === 'delete') === deleting && s >= w.from && s <= w.to)
}

/** The documented difference that covers a difference of a spec, if any: spec, path, window and values must all agree. */
export function documented(differences, spec, d) {
  if (Unexcusable.some((re) => re.test(d.path))) return undefined
  return differences.find((e) => e.specs.some((s) => globMatch(s, spec)) && inWindow(e.window, d) && e.paths.some((p) => globMatch(p, d.path) && valuesAllowed(e.values, d, p)))
}

/** The node picked the pod up when it first wrote its status: the start of the pod's timeline. */
const nodeWrote = (pod) => (pod.status?.conditions ?? []).some((c) => c.type === 'PodReadyToStartContainers') || !!pod.status?.containerStatuses

/** Some container has run: it runs, has ended, or has an earlier instance (a node may first write a container already in back-off). */
const started = (c) => c.state?.running || c.state?.terminated || c.lastState?.terminated || c.restartCount > 0
const anyStarted = (pod) => [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].some(started)

function push(out, t, flat) {
  const last = out.at(-1)
  if (last && JSON.stringify(last.flat) === JSON.stringify(flat)) return
  out.push({t: Math.max(t, last?.t ?? 0), flat})
}

/**
 * The pod's states on two clocks. Up to the delete call, from the moment its
 * first container started (or, for a pod whose containers never start, from
 * its node's first status write): how long a node takes to get a container
 * going is measured apart, as running/ready times from creation, and must not
 * shift every later sample; states before that moment are transient on both
 * nodes and are not sampled. From the delete call on, counted from that call
 * (plus DeletePhaseOffsetMs), so termination is compared with termination.
 * `final` is the pod's last record (the object the DELETED event carries).
 */
export function timelineOf(r, ctx) {
  const created = r.created
  const live = r.states.filter((s) => s.type !== 'DELETED')
  const picked = live.find((s) => anyStarted(s.pod))?.at ?? live.find((s) => nodeWrote(s.pod))?.at ?? created
  const deleted = r.deleted ?? Infinity
  const out = []
  let running, gone, held, final, readySince
  const readySpans = []
  for (const s of r.states) {
    const sinceCreate = s.at - created
    final = normalisePod(s.pod, ctx)
    if (s.type === 'DELETED') {
      gone = r.deleted !== undefined ? s.at - r.deleted : undefined
      continue
    }
    const flat = final
    const st = s.pod.status ?? {}
    // Running: a container has started (a container that ends within a second may never be written running).
    if (running === undefined && (st.containerStatuses ?? []).some(started)) running = sinceCreate
    // Ready: the spans it held (until not Ready, or the delete); readyTime picks the first that lasted.
    const isReady = s.at < deleted && (st.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
    if (isReady) readySince ??= sinceCreate
    else if (readySince !== undefined) {
      readySpans.push([readySince, sinceCreate])
      readySince = undefined
    }
    if (s.at < deleted) {
      held = flat
      const t = s.at - picked
      if (t < 0) continue
      push(out, t, flat)
    } else {
      // The state that held when the delete was asked for opens the delete phase.
      if (held && !out.some((x) => x.t >= DeletePhaseOffsetMs)) push(out, DeletePhaseOffsetMs, held)
      push(out, DeletePhaseOffsetMs + (s.at - deleted), flat)
    }
  }
  if (held && r.deleted !== undefined && !out.some((x) => x.t >= DeletePhaseOffsetMs)) push(out, DeletePhaseOffsetMs, held)
  if (readySince !== undefined) readySpans.push([readySince, Infinity])
  const goneSeen = r.states.some((s) => s.type === 'DELETED')
  return {timeline: out, times: {running, gone}, readySpans, goneSeen, final, deleteAt: r.deleted === undefined ? undefined : r.deleted - picked}
}

/** Why a spec could not be compared on a node: its create failed, it has no samples, it never went. */
function runFailures(side, r, tl) {
  if (!r) return [{path: `run ${side}: no record`, [side]: 'missing'}]
  if (r.createError) return [{path: `run ${side}: create failed`, [side]: r.createError}]
  const out = []
  if (tl.timeline.length === 0) out.push({path: `run ${side}: no samples`, [side]: `${r.states.length} watch events`})
  if (r.deleted !== undefined && !tl.goneSeen) out.push({path: `run ${side}: never gone`, [side]: 'still there after the wait'})
  for (const e of r.deleteErrors ?? []) out.push({path: `run ${side}: delete failed`, [side]: e})
  return out
}

/**
 * One spec compared: its status samples before and after the delete,
 * termination, events, times, content. Verdict: `failed` when it did not run
 * on a node, `different` when a difference is not documented, `documented`
 * when all are, `identical` when there are none.
 */
export function compareSpec(spec, rec, differences, ctx, opts = {}) {
  const sides = {}
  const failures = []
  for (const side of ['kubelet', 'vnode']) {
    const r = rec[side].pods[spec.name]
    const tl = r ? timelineOf(r, ctx[side]) : {timeline: [], times: {}, goneSeen: false}
    sides[side] = {...tl, events: eventSequence(rec[side].events[spec.name] ?? [], ctx[side]), logs: r?.logs}
    failures.push(...runFailures(side, r, tl))
  }
  const records = ['kubelet', 'vnode'].map((side) => rec[side].pods[spec.name]).filter(Boolean)
  const from = Math.min(...records.map((r) => r.created ?? Infinity))
  const to = Math.max(...records.flatMap((r) => r.states.map((s) => s.at)), from)
  const factor = loadFactor(rec.load, rec.cpus, from, to)
  const sampleTolerance = Math.min(DefaultTimingToleranceMs * factor, MaxTimingToleranceMs)
  const deleteAt = Math.min(...['kubelet', 'vnode'].map((side) => sides[side].deleteAt ?? Infinity))
  const sampleMs = [...DefaultSampleSeconds.map((s) => s * 1000).filter((t) => t < deleteAt), ...DefaultDeleteSampleSeconds.map((s) => DeletePhaseOffsetMs + s * 1000)]
  const ready = readyTimes(sides.kubelet.readySpans ?? [], sides.vnode.readySpans ?? [], Math.min(DefaultReadyHoldMs * factor, MaxReadyHoldMs))
  const diffs = [
    ...failures,
    ...compareTimelines(sides.kubelet.timeline, sides.vnode.timeline, sampleMs, sampleTolerance).map((d) =>
      d.at >= DeletePhaseOffsetMs ? {...d, at: d.at - DeletePhaseOffsetMs, path: `status-deleting ${d.path}`} : {...d, path: `status ${d.path}`},
    ),
    ...compareTermination(sides.kubelet.goneSeen && sides.kubelet.final, sides.vnode.goneSeen && sides.vnode.final),
    ...compareEvents(sides.kubelet.events, sides.vnode.events),
    ...compareTimes({...sides.kubelet.times, ready: ready[0]}, {...sides.vnode.times, ready: ready[1]}, {startToleranceMs: DefaultStartToleranceMs, goneToleranceMs: DefaultGoneToleranceMs, factor}),
    ...compareContent(spec.logs, sides.kubelet.logs, sides.vnode.logs),
  ]
  for (const d of diffs) d.documented = documented(differences, spec.name, d)?.id
  const verdict = failures.length > 0 ? 'failed' : diffs.length === 0 ? 'identical' : diffs.every((d) => d.documented) ? 'documented' : 'different'
  return {name: spec.name, verdict, factor: Math.round(factor * 100) / 100, diffs, kubelet: opts.keepSides ? sides.kubelet : undefined, vnode: opts.keepSides ? sides.vnode : undefined}
}

/** The namespaces and node names of a recording, replaced in every text so the two nodes' texts compare. */
export function contexts(nodes, namespaces) {
  return Object.fromEntries(
    ['kubelet', 'vnode'].map((side) => [
      side,
      {
        names: [
          [namespaces[side], '<ns>'],
          [nodes[side], '<node>'],
        ],
      },
    ]),
  )
}

/** Every spec of a recording compared. */
export function compareAll({specs, rec, nodes, namespaces, differences}) {
  const ctx = contexts(nodes, namespaces)
  return specs.map((spec) => compareSpec(spec, rec, differences, ctx))
}

/** The load through a recording: min, mean and max of the 1-minute average, and the CPUs. */
export function loadSummary(rec) {
  const l = (rec.load ?? []).map((s) => s.load1)
  if (l.length === 0) return undefined
  const r = (x) => Math.round(x * 10) / 10
  return {min: r(Math.min(...l)), mean: r(l.reduce((a, b) => a + b, 0) / l.length), max: r(Math.max(...l)), cpus: rec.cpus}
}
