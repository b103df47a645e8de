import {MetricsContentType, resourceMetrics} from '../metrics.js'
import type {NodeUsage} from '../node-usage.js'
import type {PodUsage} from '../sources.js'
import {send} from './respond.js'
import {type PlainRoute, ReadMethods, type RouteContext, withSlash} from './route.js'

/** The node's and the pods' samples; a source that fails is reported by the scrape_error gauge, not a 500. */
function samples(ctx: RouteContext): {node?: NodeUsage; usage: PodUsage[]; failed: boolean} {
  let node: NodeUsage | undefined
  let failed = false
  try {
    node = ctx.readNode()
  } catch {
    failed = true
  }
  let usage: PodUsage[] = []
  try {
    usage = ctx.sources.usage?.() ?? []
  } catch {
    failed = true
  }
  return {node, usage, failed}
}

/** GET /metrics/resource (the kubelet's resource metrics endpoint, what metrics-server scrapes). */
export const MetricsResourceRoute: PlainRoute = {
  kind: 'plain',
  paths: withSlash('/metrics/resource'),
  methods: ReadMethods,
  serve: (_req, res, _url, ctx) => {
    const {node, usage, failed} = samples(ctx)
    send(res, 200, resourceMetrics(node, usage, new Date(), failed), MetricsContentType)
  },
}
