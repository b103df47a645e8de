import type {IncomingMessage, ServerResponse} from 'node:http'
import type {ContainerLogs} from '../../provider/logs.js'
import type {NodeUsage} from '../node-usage.js'
import type {KubeletSources} from '../sources.js'
import type {StreamingConnection, StreamingDeps} from '../streaming/request.js'
import type {SummaryBuilder} from '../summary.js'

/**
 * One entry of the kubelet API's route table (pkg/kubelet/server/server.go
 * installs them on one mux): the paths it answers, the methods it takes, and
 * how it is served. Each route lives in a file of its own in this folder;
 * table.ts lists them.
 */

/** What a plain route may read: the node's sources and the server's state that outlives a request. */
export interface RouteContext {
  nodeName: string
  sources: KubeletSources
  readNode: () => NodeUsage
  logs: ContainerLogs
  summaries: SummaryBuilder
  /** Log follows in progress: aborted when the server stops. */
  follows: Set<AbortController>
  streaming: StreamingDeps
}

/** The methods of a read-only route (the kubelet's GET routes also answer HEAD). */
export const ReadMethods: readonly string[] = ['GET', 'HEAD']
/** exec, attach and portForward take GET and POST (the kubelet registers both). */
export const StreamingMethods: readonly string[] = ['GET', 'POST']

interface Paths {
  /** Exact paths, or every path under `prefix` (which ends with '/'). */
  paths?: readonly string[]
  prefix?: string
  methods: readonly string[]
}

/** A request answered with one HTTP response (possibly long, as a log follow). */
export interface PlainRoute extends Paths {
  kind: 'plain'
  serve(req: IncomingMessage, res: ServerResponse, url: URL, ctx: RouteContext): Promise<void> | void
}

/** A request that upgrades to SPDY streams: reached both as a plain request (to refuse it) and as an upgrade. */
export interface StreamingRoute extends Paths {
  kind: 'streaming'
  serve(conn: StreamingConnection, deps: StreamingDeps): Promise<void>
}

export type Route = PlainRoute | StreamingRoute

/** One path and its trailing-slash twin. */
export function withSlash(path: string): string[] {
  return [path, `${path}/`]
}

export function routeMatches(route: Route, path: string): boolean {
  return route.prefix !== undefined ? path.startsWith(route.prefix) : (route.paths ?? []).includes(path)
}
