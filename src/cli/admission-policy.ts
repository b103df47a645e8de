import type {V1Node, V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding} from '@kubernetes/client-node'
import {isNotFound} from '../emulator/kube/errors.js'
import type {KubeSession} from './session.js'

/**
 * Who may put pods on a node, enforced by the API server: a
 * ValidatingAdmissionPolicy and its binding that deny creating a pod bound
 * to the node (spec.nodeName) or tolerating one of its taints, and adding an
 * ephemeral container to such a pod, unless the request comes from one of
 * the users or service accounts named (and the one installing it, so the
 * node's own mirror pods pass). Both objects are owned by the Node: the
 * garbage collector removes them with it (`up --rm`, `kubectl delete node`).
 *
 * What it cannot see: pods created by controllers (a Deployment's pods are
 * created by the ReplicaSet controller's service account, which must then be
 * named), and pods the scheduler binds here without tolerating a taint
 * (a node started with --no-default-taint): keep the taint.
 */
export const AdmissionPolicyPrefix = 'vnode-node-'

export function admissionPolicyName(node: string): string {
  return `${AdmissionPolicyPrefix}${node}`
}

const cel = (s: string) => JSON.stringify(s)

/** The CEL condition "this pod is bound to or tolerates the node". */
export function targetsNodeExpression(node: V1Node): string {
  const bound = `(has(object.spec.nodeName) && object.spec.nodeName == ${cel(node.metadata!.name!)})`
  const taints = (node.spec?.taints ?? []).filter((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute')
  if (taints.length === 0) return bound
  // Toleration.ToleratesTaint: the effect empty or equal; the key equal, or empty with operator Exists; Exists, or the value equal.
  const tolerates = taints.map(
    (t) =>
      `((!has(t.effect) || t.effect == "" || t.effect == ${cel(t.effect)}) && ` +
      `((has(t.key) && t.key == ${cel(t.key)}) || ((!has(t.key) || t.key == "") && has(t.operator) && t.operator == "Exists")) && ` +
      `((has(t.operator) && t.operator == "Exists") || (has(t.value) ? t.value : "") == ${cel(t.value ?? '')}))`,
  )
  return `${bound} || (has(object.spec.tolerations) && object.spec.tolerations.exists(t, ${tolerates.join(' || ')}))`
}

export function admissionPolicyObjects(node: V1Node, allowed: string[]): {policy: V1ValidatingAdmissionPolicy; binding: V1ValidatingAdmissionPolicyBinding} {
  const name = admissionPolicyName(node.metadata!.name!)
  const ownerReferences = [{apiVersion: 'v1', kind: 'Node', name: node.metadata!.name!, uid: node.metadata!.uid!}]
  const users = [...new Set(allowed)].sort()
  const policy: V1ValidatingAdmissionPolicy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: {name, ownerReferences, labels: {'app.kubernetes.io/managed-by': 'kubectl-vnode'}},
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [
          {apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods']},
          {apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods/ephemeralcontainers']},
        ],
      },
      variables: [{name: 'targetsNode', expression: targetsNodeExpression(node)}],
      validations: [
        {
          expression: `!variables.targetsNode || request.userInfo.username in [${users.map(cel).join(', ')}]`,
          messageExpression: `"pods on node ${node.metadata!.name!} may only be created by ${users.join(', ')} (kubectl vnode admission-policy); not by " + request.userInfo.username`,
          reason: 'Forbidden',
        },
      ],
    },
  }
  const binding: V1ValidatingAdmissionPolicyBinding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: {name, ownerReferences, labels: {'app.kubernetes.io/managed-by': 'kubectl-vnode'}},
    spec: {policyName: name, validationActions: ['Deny']},
  }
  return {policy, binding}
}

/** The username the API server sees for this session (SelfSubjectReview). */
async function whoAmI(session: KubeSession): Promise<string | undefined> {
  const api = new session.lib.AuthenticationV1Api(session.config)
  const review = await api.createSelfSubjectReview({body: {apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview'}})
  return review.status?.userInfo?.username
}

/** Installs (or replaces) the node's policy and binding; returns who may create its pods. */
export async function installAdmissionPolicy(session: KubeSession, nodeName: string, allowed: string[]): Promise<string[]> {
  const node = await session.core.readNode({name: nodeName})
  const me = await whoAmI(session)
  const users = [...new Set([...allowed, ...(me ? [me] : [])])].sort()
  const {policy, binding} = admissionPolicyObjects(node, users)
  const api = new session.lib.AdmissionregistrationV1Api(session.config)
  await api.deleteValidatingAdmissionPolicyBinding({name: binding.metadata!.name!}).catch(absent)
  await api.deleteValidatingAdmissionPolicy({name: policy.metadata!.name!}).catch(absent)
  await api.createValidatingAdmissionPolicy({body: policy})
  await api.createValidatingAdmissionPolicyBinding({body: binding})
  return users
}

/** Removes them (they also go with the Node). */
export async function removeAdmissionPolicy(session: KubeSession, nodeName: string): Promise<boolean> {
  const api = new session.lib.AdmissionregistrationV1Api(session.config)
  const name = admissionPolicyName(nodeName)
  const a = await api.deleteValidatingAdmissionPolicyBinding({name}).then(() => true, absent)
  const b = await api.deleteValidatingAdmissionPolicy({name}).then(() => true, absent)
  return a || b
}

/** A delete that found nothing to delete is false; any other failure (no answer, forbidden) is the caller's error. */
function absent(error: unknown): false {
  if (isNotFound(error)) return false
  throw error
}
