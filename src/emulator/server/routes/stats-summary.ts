import {sendJson} from './respond.js'
import {type PlainRoute, ReadMethods, withSlash} from './route.js'

/** GET /stats/summary (the kubelet's summary API): node, pod and container usage. */
export const StatsSummaryRoute: PlainRoute = {
  kind: 'plain',
  paths: withSlash('/stats/summary'),
  methods: ReadMethods,
  serve: (_req, res, _url, ctx) => sendJson(res, ctx.summaries.build(ctx.nodeName, ctx.readNode(), ctx.sources.usage?.() ?? [], ctx.sources.pods())),
}
