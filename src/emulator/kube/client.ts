import type * as k8s from '@kubernetes/client-node'
import {existsSync} from 'node:fs'
import {UserError} from '../../errors.js'

export interface KubeOptions {
  kubeconfig?: string
  context?: string
}

/**
 * Counts the requests this process makes to the API server, by verb, so
 * idle cost can be measured from inside (and compared with the server's metrics).
 */
export class RequestCounter {
  total = 0
  readonly byMethod = new Map<string, number>()

  record(method: string): void {
    this.total++
    this.byMethod.set(method, (this.byMethod.get(method) ?? 0) + 1)
  }
}

/** The typed API clients one node uses, sharing one kubeconfig and one request counter. */
export interface KubeClients {
  k8s: typeof k8s
  kc: k8s.KubeConfig
  core: k8s.CoreV1Api
  coordination: k8s.CoordinationV1Api
  /** TokenReview, for the kubelet API's bearer-token authentication. */
  authentication: k8s.AuthenticationV1Api
  /** SubjectAccessReview, for the kubelet API's authorization. */
  authorization: k8s.AuthorizationV1Api
  server: string
  counter: RequestCounter
}

/** Loads the kubeconfig the way kubectl does: --kubeconfig, then $KUBECONFIG, then ~/.kube/config. */
export async function loadKubeConfig(opts: KubeOptions): Promise<k8s.KubeConfig> {
  const lib = await import('@kubernetes/client-node')
  const kc = new lib.KubeConfig()
  try {
    if (opts.kubeconfig) {
      if (!existsSync(opts.kubeconfig)) throw new UserError(`kubeconfig ${opts.kubeconfig} does not exist`)
      kc.loadFromFile(opts.kubeconfig)
    } else {
      kc.loadFromDefault()
    }
  } catch (error) {
    if (error instanceof UserError) throw error
    throw new UserError(`cannot load kubeconfig ${opts.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config'}: ${(error as Error).message}`)
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) throw new UserError(`context "${opts.context}" does not exist in the kubeconfig`)
    kc.setCurrentContext(opts.context)
  }
  if (!kc.getCurrentCluster()) {
    throw new UserError('no current cluster in the kubeconfig: set one with --context or `kubectl config use-context`')
  }
  return kc
}

export async function makeClients(opts: KubeOptions): Promise<KubeClients> {
  const lib = await import('@kubernetes/client-node')
  const kc = await loadKubeConfig(opts)
  const server = kc.getCurrentCluster()!.server
  const counter = new RequestCounter()
  const config = lib.createConfiguration({
    baseServer: new lib.ServerConfiguration(server, {}),
    authMethods: {default: kc},
    promiseMiddleware: [
      {
        pre: async (ctx) => {
          counter.record(ctx.getHttpMethod())
          return ctx
        },
        post: async (res) => res,
      },
    ],
  })
  return {
    k8s: lib,
    kc,
    core: new lib.CoreV1Api(config),
    coordination: new lib.CoordinationV1Api(config),
    authentication: new lib.AuthenticationV1Api(config),
    authorization: new lib.AuthorizationV1Api(config),
    server,
    counter,
  }
}
