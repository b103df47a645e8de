import {allContainerStatuses, isTerminalPhase} from '../../common/pods.js'
import {PodNetworkAnnotation, RelayAnnotation, SandboxLabel, WallsAnnotation} from '../../common/labels.js'
import type {V1Pod} from '@kubernetes/client-node'
import {parseQuantity} from '../../emulator/quantity.js'
import {humanAge, podReady, podRestarts, podStatus} from '../../kubectl/pod-status.js'
import {type DashboardFeed, type FeedEvent, type FeedListeners, flattenUsage, type NodeView} from './feed.js'
import {compareRows, formatCores, formatMem, podRequest, SortKeys, toneOf, type DashboardModel, type EventLine, type PodView, type SortKey, type Tone} from './model.js'

export * from './model.js'

/** At most this often the dashboard redraws (10 per second): bursts of pod updates coalesce. */
export const DefaultRedrawIntervalMs = 100
/** Ages, uptime and "lease renewed Ns ago" move once a second. */
export const DefaultTickMs = 1000
/**
 * How often per-container usage is sampled, when the node offers it: CPU is the rate over this
 * window (metrics-server's is 15 s). Sampling reads every container's cgroup, which at 100 pods
 * cost more than drawing the frames did at 2 s. Samples are taken on a tick and shown by that
 * tick's redraw: sampling never costs a frame of its own.
 */
export const DefaultUsageIntervalMs = 5000
/** The event feed keeps the latest events only. */
export const DefaultMaxEvents = 100
/** The event type of a node's own line in the feed: not a Kubernetes event. */
export const NoteType = 'Note'
/** Errors, start-up and shutdown steps kept for display. */
export const DefaultMaxNotes = 20

export interface StoreOptions {
  nodeName: string
  redrawIntervalMs?: number
  tickMs?: number
  usageIntervalMs?: number
  maxEvents?: number
}

function num(v: string | undefined): number | undefined {
  if (v === undefined) return undefined
  try {
    return parseQuantity(v)
  } catch {
    return undefined
  }
}

interface PodUsage {
  cpuCores?: number
  memBytes: number
  pids: number[]
}

/** What a row shows that only changes with the pod object itself (the feed replaces it on each change). */
interface PodFacts {
  ready: string
  status: string
  restartCount: number
  createdMs?: number
  tone: Tone
  cpuRequest: number
  memRequest: number
}

/** Adds (on) or removes (off) one listener per feed event, each typed by its event. */
function listen(feed: DashboardFeed, how: 'on' | 'off', h: FeedListeners): void {
  const subscribe = feed[how].bind(feed)
  subscribe('step', h.step)
  subscribe('node', h.node)
  subscribe('lease', h.lease)
  subscribe('event', h.event)
  subscribe('error', h.error)
  subscribe('stopping', h.stopping)
  subscribe('pod', h.pod)
  subscribe('podRemoved', h.podRemoved)
}

/**
 * Turns the node's feed into the dashboard's model: pods by UID, sorted rows,
 * a bounded event feed, header figures. Changes mark it dirty; listeners are
 * told at most once per redraw interval (first change at once, the rest
 * coalesced), so a burst of pod updates costs one redraw.
 */
export class DashboardStore {
  private readonly pods = new Map<string, V1Pod>()
  private readonly usageByPod = new Map<string, PodUsage>()
  private prevCpu = new Map<string, {cpuSeconds: number; at: number}>()
  private events: EventLine[] = []
  private steps: {step: string; detail: string}[] = []
  private errors: string[] = []
  private stopping: string[] = []
  private node: NodeView | undefined
  private sort: {key: SortKey; descending: boolean} = {key: 'namespace', descending: false}
  private model: DashboardModel
  private readonly listeners = new Set<() => void>()
  private timer: NodeJS.Timeout | undefined
  private tick: NodeJS.Timeout | undefined
  private lastUsageSample = -Infinity
  /** Per pod object: computed once, dropped with the object (an update brings a new one). */
  private readonly facts = new WeakMap<V1Pod, PodFacts>()
  private lastFlush = -Infinity
  private dirty = false
  private version = 0
  private readonly handlers: FeedListeners
  private readonly redrawMs: number
  private readonly maxEvents: number
  /** Number of times listeners were told (for tests and for measuring redraw cost). */
  flushes = 0

  constructor(
    private readonly feed: DashboardFeed,
    private readonly opts: StoreOptions,
  ) {
    this.redrawMs = opts.redrawIntervalMs ?? DefaultRedrawIntervalMs
    this.maxEvents = opts.maxEvents ?? DefaultMaxEvents
    this.handlers = {
      step: (step, detail) => this.update(() => (this.steps = [...this.steps, {step, detail}].slice(-DefaultMaxNotes))),
      node: (s) => this.update(() => (this.node = s)),
      lease: () => this.markDirty(),
      event: (e) => this.update(() => this.pushEvent(e)),
      error: (m) => this.update(() => (this.errors = [...this.errors, m].slice(-DefaultMaxNotes))),
      stopping: (d) => this.update(() => (this.stopping = [...this.stopping, d].slice(-DefaultMaxNotes))),
      pod: (p) => this.update(() => p.metadata?.uid && this.pods.set(p.metadata.uid, p)),
      podRemoved: (uid) => this.update(() => this.removePod(uid)),
    }
    this.model = this.build()
  }

  start(): this {
    listen(this.feed, 'on', this.handlers)
    this.node = this.feed.node?.() ?? this.node
    for (const p of this.feed.pods?.() ?? []) if (p.metadata?.uid) this.pods.set(p.metadata.uid, p)
    this.sampleUsageIfDue()
    this.tick = setInterval(() => this.onTick(), this.tickMs)
    this.flush()
    return this
  }

  dispose(): void {
    listen(this.feed, 'off', this.handlers)
    for (const t of [this.timer, this.tick]) if (t) clearTimeout(t)
    this.timer = this.tick = undefined
    this.listeners.clear()
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  getSnapshot = (): DashboardModel => this.model

  /** The model with every change so far, even one still waiting for its redraw slot (for the exit summary). */
  latest(): DashboardModel {
    return this.dirty ? this.build() : this.model
  }

  setSort(key: SortKey, descending?: boolean): void {
    this.update(() => (this.sort = {key, descending: descending ?? (this.sort.key === key ? !this.sort.descending : false)}))
  }

  cycleSort(): void {
    const next = SortKeys[(SortKeys.indexOf(this.sort.key) + 1) % SortKeys.length]
    this.setSort(next, false)
  }

  reverseSort(): void {
    this.setSort(this.sort.key, !this.sort.descending)
  }

  /** Live pods, for the details pane and logs (the model holds them too). */
  pod(uid: string): V1Pod | undefined {
    return this.pods.get(uid)
  }

  private removePod(uid: string): void {
    this.pods.delete(uid)
    this.usageByPod.delete(uid)
  }

  /** A line of the node's own (src/ui/node-notes.ts), shown in the event feed at the time it came. */
  note(text: string, time = new Date()): void {
    this.update(() => this.pushEvent({type: NoteType, reason: '', message: text, object: {}, count: 1, time}))
  }

  private pushEvent(e: FeedEvent): void {
    const object = `${(e.object.kind ?? '').toLowerCase()}/${e.object.name ?? ''}`
    const prev = this.events.findIndex((x) => x.object === object && x.reason === e.reason && x.message === e.message)
    const line: EventLine = {time: e.time, type: e.type, reason: e.reason, object, uid: e.object.uid, message: e.message, count: e.count}
    // A repeat replaces its earlier line (the recorder counts it), so the feed shows distinct events.
    if (prev >= 0) this.events.splice(prev, 1)
    this.events.push(line)
    if (this.events.length > this.maxEvents) this.events = this.events.slice(-this.maxEvents)
  }

  private get tickMs(): number {
    return this.opts.tickMs ?? DefaultTickMs
  }

  /** Ages move; usage is sampled when its interval has passed (within half a tick, as timers drift). */
  private onTick(): void {
    this.sampleUsageIfDue()
    this.markDirty()
  }

  private sampleUsageIfDue(): void {
    if (!this.feed.usage) return
    const now = Date.now()
    if (now - this.lastUsageSample < (this.opts.usageIntervalMs ?? DefaultUsageIntervalMs) - this.tickMs / 2) return
    this.lastUsageSample = now
    this.sampleUsage()
  }

  private sampleUsage(): void {
    const samples = flattenUsage(this.feed.usage?.() ?? [])
    const now = Date.now()
    const next = new Map<string, {cpuSeconds: number; at: number}>()
    this.usageByPod.clear()
    for (const s of samples) {
      const key = `${s.podUID}/${s.container}`
      const prev = this.prevCpu.get(key)
      next.set(key, {cpuSeconds: s.cpuSeconds, at: now})
      const u = this.usageByPod.get(s.podUID) ?? {memBytes: 0, pids: []}
      if (prev && now > prev.at && s.cpuSeconds >= prev.cpuSeconds) {
        u.cpuCores = (u.cpuCores ?? 0) + (s.cpuSeconds - prev.cpuSeconds) / ((now - prev.at) / 1000)
      }
      u.memBytes += s.memoryBytes
      if (s.pid) u.pids.push(s.pid)
      this.usageByPod.set(s.podUID, u)
    }
    // Replaced, not merged: containers that went away are forgotten.
    this.prevCpu = next
  }

  private update(change: () => unknown): void {
    change()
    this.markDirty()
  }

  private markDirty(): void {
    this.dirty = true
    if (this.timer) return
    const wait = this.lastFlush + this.redrawMs - Date.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  private flush(): void {
    this.timer = undefined
    this.dirty = false
    this.lastFlush = Date.now()
    this.model = this.build()
    this.flushes++
    for (const l of this.listeners) l()
  }

  /** True while a change waits for the next redraw slot. */
  get pending(): boolean {
    return this.dirty
  }

  private build(): DashboardModel {
    const now = Date.now()
    const rows = [...this.pods.values()].map((p) => this.row(p, now))
    rows.sort(compareRows(this.sort.key))
    if (this.sort.descending) rows.reverse()
    const active = [...this.pods.values()].filter((p) => !isTerminalPhase(p.status?.phase))
    const n = this.node
    return {
      nodeName: n?.name ?? this.opts.nodeName,
      server: this.feed.server,
      serverVersion: this.feed.serverVersion,
      sandbox: n?.labels?.[SandboxLabel],
      walls: n?.annotations?.[WallsAnnotation],
      podNetwork: n?.annotations?.[PodNetworkAnnotation],
      pool: this.poolView(),
      kubeletEndpoint: n ? {relay: n.annotations?.[RelayAnnotation], address: n.kubeletEndpoint} : undefined,
      now,
      startedAt: this.feed.startedAt,
      lastLeaseRenewal: this.feed.lastLeaseRenewal,
      conditions: n?.conditions ?? [],
      podsUsed: active.length,
      podsCapacity: num(n?.allocatable?.pods ?? n?.capacity?.pods),
      cpuRequested: active.reduce((s, p) => s + this.factsOf(p).cpuRequest, 0),
      memRequested: active.reduce((s, p) => s + this.factsOf(p).memRequest, 0),
      cpuAllocatable: num(n?.allocatable?.cpu),
      memAllocatable: num(n?.allocatable?.memory),
      rows,
      events: this.events.slice(),
      steps: this.steps.slice(),
      errors: this.errors.slice(),
      stopping: this.stopping.slice(),
      sort: {...this.sort},
      version: ++this.version,
    }
  }

  /** Three numbers of the node's pool, read as the frame is built (synchronous and cheap). */
  private poolView(): DashboardModel['pool'] {
    const p = this.feed.pool?.()
    return p ? {ready: p.ready, target: p.target, cap: p.cap} : undefined
  }

  private factsOf(p: V1Pod): PodFacts {
    let f = this.facts.get(p)
    if (!f) {
      const ready = podReady(p)
      const status = podStatus(p)
      f = {
        ready,
        status,
        restartCount: allContainerStatuses(p).reduce((s, c) => s + (c.restartCount ?? 0), 0),
        createdMs: p.metadata?.creationTimestamp ? new Date(p.metadata.creationTimestamp).getTime() : undefined,
        tone: toneOf(status, ready),
        cpuRequest: podRequest(p, 'cpu'),
        memRequest: podRequest(p, 'memory'),
      }
      this.facts.set(p, f)
    }
    return f
  }

  private row(p: V1Pod, now: number): PodView {
    const uid = p.metadata?.uid ?? ''
    const {ready, status, restartCount, tone} = this.factsOf(p)
    const u = this.usageByPod.get(uid)
    const created = this.factsOf(p).createdMs ?? now
    return {
      uid,
      namespace: p.metadata?.namespace ?? '',
      name: p.metadata?.name ?? '',
      ready,
      status,
      restarts: podRestarts(p, now),
      restartCount,
      age: humanAge(now - created),
      createdMs: created,
      pid: u?.pids.length ? u.pids.join(',') : '-',
      cpu: u?.cpuCores !== undefined ? formatCores(u.cpuCores) : '-',
      mem: u ? formatMem(u.memBytes) : '-',
      cpuCores: u?.cpuCores,
      memBytes: u?.memBytes,
      tone,
      pod: p,
    }
  }
}
