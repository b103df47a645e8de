import type {CompletionSources} from './completion.js'
import {listVnodePods} from './pods-service.js'
import {openSession} from './session.js'

/** A completion waits this long for the API server at most: the shell is waiting. */
export const DefaultCompletionTimeout = '3s'

const flagsOf = (values: Record<string, string>) => ({
  kubeconfig: values.kubeconfig,
  context: values.context,
  namespace: values.namespace,
  'request-timeout': DefaultCompletionTimeout,
})

/** Pods of the vnode nodes, contexts of the kubeconfig, namespaces of the cluster, as the words so far select them. */
export const clusterCompletionSources: CompletionSources = {
  async pods(values) {
    const session = await openSession(flagsOf(values))
    const {pods} = await listVnodePods(session, {namespace: session.namespace})
    return pods.map((p) => p.metadata!.name!)
  },
  async contexts(values) {
    const session = await openSession({...flagsOf(values), context: undefined})
    return session.kc.getContexts().map((c) => c.name)
  },
  async namespaces(values) {
    const session = await openSession(flagsOf(values))
    return (await session.core.listNamespace()).items.map((n) => n.metadata!.name!).sort()
  },
}
