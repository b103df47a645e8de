import {AttachRoute} from './attach.js'
import {ContainerLogsRoute} from './container-logs.js'
import {ExecRoute} from './exec.js'
import {HealthzRoute} from './healthz.js'
import {MetricsRoute} from './metrics.js'
import {MetricsResourceRoute} from './metrics-resource.js'
import {PodsRoute} from './pods.js'
import {PortForwardRoute} from './port-forward.js'
import {type Route, routeMatches} from './route.js'
import {RunningPodsRoute} from './running-pods.js'
import {StatsSummaryRoute} from './stats-summary.js'

/**
 * Every path the kubelet API of a node answers. No two routes overlap, so the
 * order only groups them: read-only endpoints, logs, then the streaming ones.
 */
export const KubeletRoutes: readonly Route[] = [
  HealthzRoute,
  PodsRoute,
  RunningPodsRoute,
  StatsSummaryRoute,
  MetricsRoute,
  MetricsResourceRoute,
  ContainerLogsRoute,
  ExecRoute,
  AttachRoute,
  PortForwardRoute,
]

export function findRoute(path: string, routes: readonly Route[] = KubeletRoutes): Route | undefined {
  return routes.find((r) => routeMatches(r, path))
}
