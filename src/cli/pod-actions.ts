import type {KubeOptions} from '../emulator/kube/client.js'
import {type KubeSession, kubectlErrorText, openSession} from './session.js'

/** Kills from the dashboard wait at most this long for the API server. */
export const DefaultActionTimeout = '30s'

/**
 * What the dashboard may do to the cluster: delete a pod through the API, as
 * kubectl delete does (never a signal straight to a process). The client is
 * made on first use.
 */
export function podActions(opts: KubeOptions): {deletePod(namespace: string, name: string, o: {force: boolean}): Promise<void>} {
  let session: Promise<KubeSession> | undefined
  return {
    async deletePod(namespace, name, {force}) {
      session ??= openSession({kubeconfig: opts.kubeconfig, context: opts.context, 'request-timeout': DefaultActionTimeout})
      const s = await session
      try {
        await s.core.deleteNamespacedPod({name, namespace, gracePeriodSeconds: force ? 0 : undefined})
      } catch (error) {
        throw new Error(kubectlErrorText(error, s), {cause: error})
      }
    },
  }
}
