import {send} from './respond.js'
import {type PlainRoute, ReadMethods} from './route.js'

/** GET /healthz and its named checks (the kubelet's healthz.InstallHandler): the server answers, so it is healthy. */
export const HealthzRoute: PlainRoute = {
  kind: 'plain',
  paths: ['/healthz', '/healthz/', '/healthz/ping', '/healthz/log', '/healthz/syncloop'],
  methods: ReadMethods,
  serve: (_req, res) => send(res, 200, 'ok'),
}
