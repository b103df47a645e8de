import type {KubeConfig} from '@kubernetes/client-node'
import {RealClock, type Clock} from '../../common/clock.js'
import {Backoff, sleep} from './backoff.js'
import type {RequestCounter} from './client.js'
import {isGone} from './errors.js'

/**
 * The server ends a watch after this long and it is resumed from its
 * resourceVersion: a connection a middlebox silently dropped is not trusted
 * for longer (client-go's reflector uses 5-10 min).
 */
export const DefaultWatchTimeoutSeconds = 300
/** Backoff after a failed list or watch, from this... */
export const DefaultWatchRetryInitialMs = 200
/** ...doubling up to this. */
export const DefaultWatchRetryMaxMs = 10_000
/**
 * A watch that lasted less than this and delivered nothing is not a healthy
 * one even when it ended cleanly: the next one waits (backoff) instead of
 * following at once, so a server or proxy that closes every watch at once
 * is not hammered.
 */
export const DefaultMinHealthyWatchMs = 1_000

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED'

/** How one watch request ended. */
export type WatchEnd =
  /** The server closed it (its timeout, a restart): resume from the last resourceVersion. */
  | {kind: 'closed'}
  /** 410 Gone: the resourceVersion was compacted away; only a relist can tell what changed. */
  | {kind: 'expired'}
  /** Anything else: retry from the same resourceVersion after a backoff. */
  | {kind: 'failed'; error: unknown}
  /** Our own signal aborted it. */
  | {kind: 'stopped'}

/** client-node's Watch.watch: resolves to the request's controller once the answer's headers are in; done is called once. */
export type OpenWatch = (
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  onEvent: (type: string, obj: unknown) => void,
  done: (err: unknown) => void,
) => Promise<AbortController | undefined | void>

/** A watch ERROR event's object is a metav1.Status. */
interface WatchStatus {
  code?: number
  reason?: string
  message?: string
}

/** An ERROR event other than 410 as an error that describeApiError and kubectlErrorText print the server's way. */
export function watchStatusError(status: unknown): Error {
  const s = (status ?? {}) as WatchStatus
  return Object.assign(new Error(s.message ?? 'watch error event'), {statusCode: s.code, body: s})
}

function isAbortError(err: unknown): boolean {
  const e = err as {name?: string; type?: string}
  return e?.name === 'AbortError' || e?.type === 'aborted'
}

/**
 * How a watch ended, from what was seen of it: our signal, an ERROR event
 * (410 or another), and the error client-node's done callback got (an HTTP
 * status code for a refused request, a transport error, an AbortError when
 * we cut it ourselves, or nothing when the server closed it).
 */
export function classifyWatchEnd(seen: {stopped: boolean; expiredEvent: boolean; errorEvent?: unknown; error?: unknown}): WatchEnd {
  if (seen.stopped) return {kind: 'stopped'}
  if (seen.expiredEvent || isGone(seen.error)) return {kind: 'expired'}
  if (seen.errorEvent !== undefined) return {kind: 'failed', error: seen.errorEvent}
  // We abort a watch only on an ERROR event (handled above) or our signal: an abort is a close.
  if (seen.error && !isAbortError(seen.error)) return {kind: 'failed', error: seen.error}
  return {kind: 'closed'}
}

/** Where a loop starts: list first, or watch from a version (undefined: the server sends what exists now as ADDED events). */
export const ListFirst = Symbol('list first')

export interface WatchLoopOptions {
  /** Opens the watch requests with client-node's Watch on this kubeconfig (or with `open`, for tests). */
  kc?: KubeConfig
  open?: OpenWatch
  /** e.g. /api/v1/pods */
  path: string
  /** fieldSelector, labelSelector; resourceVersion, allowWatchBookmarks and timeoutSeconds are the loop's. */
  query?: Record<string, string | undefined>
  from: string | undefined | typeof ListFirst
  /**
   * A complete listing, handed to the caller, that returns the
   * resourceVersion to watch from: first when `from` is ListFirst, and
   * after every expiry.
   */
  list: () => Promise<string | undefined>
  onEvent: (type: WatchEventType, obj: unknown) => void
  /** A failed list or watch, before its backoff. */
  onError?: (error: unknown) => void
  /** The resourceVersion expired; a relist follows. */
  onExpired?: () => void
  /** Counts each watch request and the watches open, as the typed clients' requests are counted. */
  counter?: RequestCounter
  timeoutSeconds?: number
  retryInitialMs?: number
  retryMaxMs?: number
  minHealthyWatchMs?: number
  /** The backoffs' and the healthy watch's time (tests drive it). */
  clock?: Clock
}

/**
 * List-and-watch until the signal aborts: each watch starts from the last
 * resourceVersion seen (bookmarks included), a closed one is resumed, a
 * failed one is retried after a capped backoff, and one whose version
 * expired (410 Gone) makes the caller relist. Resolves once stopped; the
 * watch in hand is aborted then, and one whose answer is still on its way
 * is aborted as it arrives.
 */
export async function runWatchLoop(o: WatchLoopOptions, signal: AbortSignal): Promise<void> {
  const open = o.open ?? (await clientWatch(o.kc))
  const backoff = new Backoff(o.retryInitialMs ?? DefaultWatchRetryInitialMs, o.retryMaxMs ?? DefaultWatchRetryMaxMs)
  const minHealthyMs = o.minHealthyWatchMs ?? DefaultMinHealthyWatchMs
  const clock = o.clock ?? RealClock
  const wait = (ms: number) => sleep(ms, signal, clock)
  let mustList = o.from === ListFirst
  let resourceVersion = o.from === ListFirst ? undefined : o.from
  while (!signal.aborted) {
    let listed = false
    if (mustList) {
      try {
        resourceVersion = await o.list()
      } catch (error) {
        if (signal.aborted) return
        o.onError?.(error)
        await wait(backoff.next())
        continue
      }
      mustList = false
      listed = true
      if (signal.aborted) return
    }
    const startedAt = clock.now()
    const {end, events} = await watchOnce(open, o, resourceVersion, signal, (rv) => (resourceVersion = rv))
    // A watch that ran for a while or delivered something was healthy: failures start over from the shortest wait.
    const healthy = events > 0 || clock.now() - startedAt >= minHealthyMs
    if (healthy) backoff.reset()
    switch (end.kind) {
      case 'stopped':
        return
      case 'closed':
        if (!healthy) await wait(backoff.next())
        break
      case 'expired':
        mustList = true
        o.onExpired?.()
        // A version fresh from a list that is already gone: wait rather than relist in a tight loop.
        if (listed && !healthy) await wait(backoff.next())
        break
      case 'failed':
        o.onError?.(end.error)
        await wait(backoff.next())
        break
    }
  }
}

async function clientWatch(kc: KubeConfig | undefined): Promise<OpenWatch> {
  if (!kc) throw new Error('runWatchLoop needs kc or open')
  const {Watch} = await import('@kubernetes/client-node')
  const w = new Watch(kc)
  return (path, query, onEvent, done) => w.watch(path, query, onEvent, done)
}

/** One watch request, until it ends; every resourceVersion seen goes to track. */
function watchOnce(open: OpenWatch, o: WatchLoopOptions, resourceVersion: string | undefined, signal: AbortSignal, track: (rv: string) => void): Promise<{end: WatchEnd; events: number}> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve({end: {kind: 'stopped'}, events: 0})
    let controller: AbortController | undefined
    let ended = false
    let expiredEvent = false
    let errorEvent: unknown
    let events = 0
    o.counter?.record('WATCH', o.path)
    const closed = o.counter?.watchOpened() ?? (() => undefined)
    // A stop ends this at once. The controller comes only with the answer's headers: a stop
    // before that aborts it on arrival (waiting for a server that does not answer would hang the stop).
    const cut = () => done(undefined)
    signal.addEventListener('abort', cut, {once: true})
    const done = (err: unknown) => {
      if (ended) return
      ended = true
      closed()
      signal.removeEventListener('abort', cut)
      controller?.abort()
      resolve({end: classifyWatchEnd({stopped: signal.aborted, expiredEvent, errorEvent, error: err}), events})
    }
    const onEvent = (type: string, obj: unknown) => {
      if (ended || signal.aborted || expiredEvent || errorEvent !== undefined) return
      if (type === 'ERROR') {
        if (isGone(obj)) expiredEvent = true
        else errorEvent = watchStatusError(obj)
        // The server ends the watch after an ERROR anyway; do not wait for it.
        controller?.abort()
        return
      }
      events++
      const rv = (obj as {metadata?: {resourceVersion?: string}} | undefined)?.metadata?.resourceVersion
      if (rv) track(rv)
      // BOOKMARK: only the resourceVersion moves.
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') o.onEvent(type, obj)
    }
    const query = {
      ...o.query,
      resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: o.timeoutSeconds ?? DefaultWatchTimeoutSeconds,
    }
    open(o.path, query, onEvent, done).then(
      (c) => {
        if (!c) return
        controller = c
        if (ended || signal.aborted || expiredEvent || errorEvent !== undefined) c.abort()
      },
      (error: unknown) => done(error ?? new Error('watch failed')),
    )
  })
}
