import type {V1Pod} from '@kubernetes/client-node'
import {PodPidsAnnotation} from '../../../common/labels.js'
import {defaultRunningCheck, type KubeletSources} from '../sources.js'
import {podList} from './pods.js'
import {sendJson} from './respond.js'
import {type PlainRoute, ReadMethods, withSlash} from './route.js'

/** The runtime's view: identity and containers only, as the kubelet's /runningpods/ reports. */
function runningPods(sources: KubeletSources): V1Pod[] {
  const running = sources.isRunning ?? defaultRunningCheck(sources.usage)
  const pids = new Map(
    (sources.usage?.() ?? []).map((u) => [
      u.uid,
      u.containers
        .filter((c) => c.pid)
        .map((c) => `${c.name}=${c.pid}`)
        .join(','),
    ]),
  )
  return sources
    .pods()
    .filter(running)
    .map((p) => ({
      metadata: {
        name: p.metadata?.name,
        namespace: p.metadata?.namespace,
        uid: p.metadata?.uid,
        creationTimestamp: undefined,
        // The process ids behind the pod (`kubectl vnode pods -o wide` shows them).
        ...(pids.get(p.metadata?.uid ?? '') ? {annotations: {[PodPidsAnnotation]: pids.get(p.metadata!.uid!)!}} : {}),
      },
      spec: {containers: (p.spec?.containers ?? []).map((c) => ({name: c.name, image: c.image}))},
      status: {},
    }))
}

/** GET /runningpods (the kubelet's getRunningPods): the pods whose processes run. */
export const RunningPodsRoute: PlainRoute = {
  kind: 'plain',
  paths: withSlash('/runningpods'),
  methods: ReadMethods,
  serve: (_req, res, _url, ctx) => sendJson(res, podList(runningPods(ctx.sources))),
}
