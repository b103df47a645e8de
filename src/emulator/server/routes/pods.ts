import type {V1Pod} from '@kubernetes/client-node'
import {sendJson} from './respond.js'
import {type PlainRoute, ReadMethods, withSlash} from './route.js'

/** A PodList as the kubelet writes it: the items without their own kind and apiVersion. */
export function podList(pods: V1Pod[]): unknown {
  return {kind: 'PodList', apiVersion: 'v1', metadata: {}, items: pods.map((p) => ({...p, kind: undefined, apiVersion: undefined}))}
}

/** GET /pods (the kubelet's getPods): every pod bound to this node, as the node sees it. */
export const PodsRoute: PlainRoute = {
  kind: 'plain',
  paths: withSlash('/pods'),
  methods: ReadMethods,
  serve: (_req, res, _url, ctx) => sendJson(res, podList(ctx.sources.pods())),
}
