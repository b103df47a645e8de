import {describe, expect, test} from '@jest/globals'
import {RequestCounter} from '../../src/emulator/kube/client.js'
import {describeApiError} from '../../src/emulator/kube/errors.js'
import {classifyWatchEnd, ListFirst, type OpenWatch, runWatchLoop, type WatchEventType, type WatchLoopOptions} from '../../src/emulator/kube/watch-loop.js'
import {FakeClock, settle} from './fake-clock.js'

/** One watch request the loop made, driven by the test as the server would. */
interface FakeRequest {
  query: Record<string, unknown>
  at: number
  controller: AbortController
  event(type: string, obj: unknown): void
  /** The server ends the watch (done without an error). */
  close(): void
  fail(error: unknown): void
}

/**
 * Stands in for client-node's Watch.watch: done is called once (also when
 * the controller is aborted); an HTTP error status is reported through done
 * before the (already aborted) controller is returned, as client-node does.
 * Time is the fake clock's: a request's `at`, and the loop's backoffs, which
 * request() lets run out.
 */
class FakeServer {
  readonly clock = new FakeClock()
  readonly requests: FakeRequest[] = []
  /** The HTTP status to refuse the next requests with, one per request (200: stream). */
  statuses: number[] = []
  /** When set, the next request's controller is handed out only when this resolves. */
  holdHeaders: Promise<void> | undefined

  open: OpenWatch = async (_path, query, onEvent, done) => {
    const controller = new AbortController()
    let ended = false
    const end = (err: unknown) => {
      if (ended) return
      ended = true
      controller.abort()
      done(err)
    }
    controller.signal.addEventListener('abort', () => end(Object.assign(new Error('The operation was aborted.'), {name: 'AbortError'})))
    const req: FakeRequest = {
      query,
      at: this.clock.now(),
      controller,
      // Delivered even after the end: a client may still hand over lines it had buffered.
      event: (type, obj) => onEvent(type, obj),
      close: () => end(null),
      fail: (e) => end(e),
    }
    this.requests.push(req)
    const status = this.statuses.shift() ?? 200
    if (this.holdHeaders) {
      const hold = this.holdHeaders
      this.holdHeaders = undefined
      await hold
    }
    if (status !== 200) end(Object.assign(new Error(status === 410 ? 'Gone' : 'Internal Server Error'), {statusCode: status}))
    return controller
  }

  /**
   * The nth request (0-based), once made: the loop runs until it makes it or
   * waits on the clock, whose next timer (a backoff) is then let run out;
   * a loop that neither requests nor waits fails the test.
   */
  async request(n: number): Promise<FakeRequest> {
    for (let idle = 0; this.requests.length <= n;) {
      await settle()
      if (this.requests.length > n) break
      if (this.clock.pending > 0) {
        await this.clock.advance(this.clock.nextAt - this.clock.now())
        idle = 0
      } else if (++idle > 20) throw new Error(`no request #${n}, and the loop waits on no timer (${this.requests.length} made)`)
    }
    return this.requests[n]
  }
}

const pod = (name: string, rv: string) => ({metadata: {name, resourceVersion: rv}})

function start(server: FakeServer, opts: Partial<WatchLoopOptions> = {}) {
  const events: [WatchEventType, string][] = []
  const errors: string[] = []
  const lists: number[] = []
  let expiries = 0
  let listVersion = 100
  const counter = new RequestCounter()
  const ac = new AbortController()
  const done = runWatchLoop(
    {
      open: server.open,
      path: '/api/v1/pods',
      query: {fieldSelector: 'spec.nodeName=n1'},
      from: '10',
      list: async () => {
        lists.push(Date.now())
        return String(listVersion++)
      },
      onEvent: (type, obj) => events.push([type, (obj as {metadata: {name: string}}).metadata.name]),
      onError: (e) => errors.push(describeApiError(e)),
      onExpired: () => expiries++,
      counter,
      retryInitialMs: 40,
      retryMaxMs: 100,
      minHealthyWatchMs: 50,
      clock: server.clock,
      ...opts,
    },
    ac.signal,
  )
  return {events, errors, lists, counter, done, stop: () => ac.abort(), expiries: () => expiries}
}

describe('classifyWatchEnd', () => {
  test('410 as an ERROR event or as the HTTP status is an expiry; our own abort is a stop; other errors are failures', () => {
    expect(classifyWatchEnd({stopped: false, expiredEvent: false})).toEqual({kind: 'closed'})
    expect(classifyWatchEnd({stopped: false, expiredEvent: true, error: {name: 'AbortError'}})).toEqual({kind: 'expired'})
    expect(classifyWatchEnd({stopped: false, expiredEvent: false, error: {statusCode: 410}})).toEqual({kind: 'expired'})
    expect(classifyWatchEnd({stopped: true, expiredEvent: true, error: {statusCode: 410}})).toEqual({kind: 'stopped'})
    expect(classifyWatchEnd({stopped: false, expiredEvent: false, error: {statusCode: 500}})).toEqual({kind: 'failed', error: {statusCode: 500}})
    expect(classifyWatchEnd({stopped: false, expiredEvent: false, errorEvent: 'e', error: {name: 'AbortError'}})).toEqual({kind: 'failed', error: 'e'})
    expect(classifyWatchEnd({stopped: false, expiredEvent: false, error: {name: 'AbortError'}})).toEqual({kind: 'closed'})
  })
})

describe('runWatchLoop', () => {
  test('asks for bookmarks and a server timeout, tracks the version of every event (bookmarks too) and resumes from it after a close', async () => {
    const server = new FakeServer()
    const w = start(server, {timeoutSeconds: 42})
    const first = await server.request(0)
    expect(first.query).toEqual({fieldSelector: 'spec.nodeName=n1', resourceVersion: '10', allowWatchBookmarks: true, timeoutSeconds: 42})
    first.event('ADDED', pod('a', '11'))
    first.event('MODIFIED', pod('a', '12'))
    first.event('DELETED', pod('a', '13'))
    first.event('BOOKMARK', {metadata: {resourceVersion: '20'}})
    first.close()
    const second = await server.request(1)
    expect(second.query.resourceVersion).toBe('20')
    expect(w.events).toEqual([
      ['ADDED', 'a'],
      ['MODIFIED', 'a'],
      ['DELETED', 'a'],
    ])
    expect(w.lists).toEqual([])
    expect(w.counter.byResource.get('WATCH pods')).toBe(2)
    expect(w.counter.openWatches).toBe(1)
    w.stop()
    await w.done
    expect(second.controller.signal.aborted).toBe(true)
    expect(w.counter.openWatches).toBe(0)
  })

  test('a 410 ERROR event: the watch is cut, the caller relists and the next watch starts from the list', async () => {
    const server = new FakeServer()
    const w = start(server)
    const first = await server.request(0)
    first.event('ERROR', {kind: 'Status', code: 410, reason: 'Expired', message: 'too old'})
    expect(first.controller.signal.aborted).toBe(true)
    const second = await server.request(1)
    expect(w.lists).toHaveLength(1)
    expect(w.expiries()).toBe(1)
    expect(second.query.resourceVersion).toBe('100')
    expect(w.errors).toEqual([])
    w.stop()
    await w.done
  })

  test('an HTTP 410 answer to the watch request: relist too, not a retry of the same version', async () => {
    const server = new FakeServer()
    server.statuses = [410]
    const w = start(server)
    await server.request(0)
    const second = await server.request(1)
    expect(w.lists).toHaveLength(1)
    expect(second.query.resourceVersion).toBe('100')
    expect(w.errors).toEqual([])
    w.stop()
    await w.done
    expect(w.counter.openWatches).toBe(0)
  })

  test('a version that expires again straight after its list waits a backoff before the next relist', async () => {
    const server = new FakeServer()
    server.statuses = [410, 410, 410]
    const w = start(server)
    await server.request(3)
    expect(w.lists).toHaveLength(3)
    // The first relist follows the expiry at once; the ones after a fresh list's expiry wait.
    expect(server.requests.map((r, i) => r.at - (server.requests[i - 1]?.at ?? r.at))).toEqual([0, 0, 40, 80])
    w.stop()
    await w.done
  })

  test('other failures keep the version and back off, doubling up to the cap, reported each time', async () => {
    const server = new FakeServer()
    server.statuses = [500, 500, 500, 500]
    const w = start(server)
    const fifth = await server.request(4)
    expect(server.requests.map((r) => r.query.resourceVersion)).toEqual(['10', '10', '10', '10', '10'])
    const gaps = server.requests.slice(1).map((r, i) => r.at - server.requests[i].at)
    expect(gaps).toEqual([40, 80, 100, 100])
    expect(w.errors).toEqual(Array(4).fill('HTTP 500: Internal Server Error'))
    expect(w.lists).toEqual([])
    fifth.event('ADDED', pod('a', '11'))
    w.stop()
    await w.done
  })

  test("an ERROR event other than 410 is a failure, reported with the server's reason", async () => {
    const server = new FakeServer()
    const w = start(server)
    const first = await server.request(0)
    first.event('ADDED', pod('a', '11'))
    first.event('ERROR', {kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd is sad'})
    const second = await server.request(1)
    expect(w.errors).toEqual(['InternalError: etcd is sad'])
    expect(second.query.resourceVersion).toBe('11')
    expect(w.lists).toEqual([])
    w.stop()
    await w.done
  })

  test('a watch the server closes at once, empty, is reopened after a backoff, not in a tight loop', async () => {
    const server = new FakeServer()
    const w = start(server)
    ;(await server.request(0)).close()
    ;(await server.request(1)).close()
    await server.request(2)
    expect(server.requests[1].at - server.requests[0].at).toBe(40)
    expect(server.requests[2].at - server.requests[1].at).toBe(80)
    w.stop()
    await w.done
  })

  test('ListFirst lists before the first watch; a failed list is reported and retried after a backoff', async () => {
    const server = new FakeServer()
    let calls = 0
    const w = start(server, {
      from: ListFirst,
      list: async () => {
        if (calls++ === 0) throw Object.assign(new Error('Service Unavailable'), {statusCode: 503})
        return '77'
      },
    })
    const first = await server.request(0)
    expect(calls).toBe(2)
    expect(first.query.resourceVersion).toBe('77')
    expect(w.errors).toEqual(['HTTP 503: Service Unavailable'])
    w.stop()
    await w.done
  })

  test('from undefined: the first watch has no version (the server sends what exists as ADDED)', async () => {
    const server = new FakeServer()
    const w = start(server, {from: undefined})
    const first = await server.request(0)
    expect('resourceVersion' in first.query && first.query.resourceVersion !== undefined).toBe(false)
    first.event('ADDED', pod('n', '5'))
    first.close()
    expect((await server.request(1)).query.resourceVersion).toBe('5')
    w.stop()
    await w.done
  })

  test("a stop before the answer's headers ends the loop at once; the watch is aborted when its controller arrives", async () => {
    const server = new FakeServer()
    let release!: () => void
    server.holdHeaders = new Promise<void>((r) => (release = r))
    const w = start(server)
    const first = await server.request(0)
    w.stop()
    await w.done
    expect(w.counter.openWatches).toBe(0)
    expect(first.controller.signal.aborted).toBe(false)
    release()
    await settle()
    expect(first.controller.signal.aborted).toBe(true)
    expect(server.requests).toHaveLength(1)
  })

  test('events after an expiry or a stop are not delivered', async () => {
    const server = new FakeServer()
    const w = start(server)
    const first = await server.request(0)
    first.event('ERROR', {code: 410})
    first.event('ADDED', pod('late', '99'))
    const second = await server.request(1)
    w.stop()
    second.event('ADDED', pod('later', '101'))
    await w.done
    expect(w.events).toEqual([])
  })
})
