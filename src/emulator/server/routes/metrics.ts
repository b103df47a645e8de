import {MetricsContentType} from '../metrics.js'
import {nodeMetrics} from '../node-metrics.js'
import {send} from './respond.js'
import {type PlainRoute, ReadMethods, withSlash} from './route.js'

/** GET /metrics (the kubelet's own metrics endpoint): the node's warm pool of pod sandboxes, its heap trims. */
export const MetricsRoute: PlainRoute = {
  kind: 'plain',
  paths: withSlash('/metrics'),
  methods: ReadMethods,
  serve: (_req, res, _url, ctx) => send(res, 200, nodeMetrics({pool: ctx.sources.pool?.(), heapTrims: ctx.sources.heapTrims?.()}), MetricsContentType),
}
