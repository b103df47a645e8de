import type {V1Node, V1Taint} from '@kubernetes/client-node'
import {AllowedNamespacesAnnotation, NodeMarkerLabel} from '../../common/labels.js'
import {readdirSync} from 'node:fs'
import {nodesStateDir} from '../../common/state-dirs.js'
import {UserError} from '../../errors.js'
import type {KubeSession} from '../session.js'

/** The node a dev pod is pinned to. */
export interface ChosenNode {
  name: string
  taints: V1Taint[]
  /** The namespaces whose pods the node runs; undefined: every namespace (or a node that does not say). */
  allowedNamespaces?: string[]
}

/** The node's vnode.dev/allowed-namespaces annotation: a list, or undefined for `*` or none. */
function allowedOn(node: V1Node): string[] | undefined {
  const value = node.metadata?.annotations?.[AllowedNamespacesAnnotation]
  if (value === undefined || value.trim() === '*') return undefined
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

/** Refused before anything is made: a namespace the node would not admit pods from. */
export function checkNamespaceAllowed(node: ChosenNode, namespace: string): void {
  const allowed = node.allowedNamespaces
  if (!allowed || allowed.includes(namespace)) return
  throw new UserError(
    `node "${node.name}" runs pods of namespace${allowed.length > 1 ? 's' : ''} ${allowed.join(', ')} only, not "${namespace}": use -n, or restart it with kubectl vnode up --allowed-namespaces`,
  )
}

function isReady(node: V1Node): boolean {
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
}

function isVnode(node: V1Node): boolean {
  return node.metadata?.labels?.[NodeMarkerLabel] === 'true'
}

/**
 * --node, or the only vnode node that is Ready (a node whose `up` has ended
 * stays registered, NotReady: it would leave the dev pod Pending), or of
 * several the only one registered from this host (localNames). Refused:
 * a node that is not a vnode node (a kubelet cannot run the local directory),
 * none, or several to choose from.
 */
export function chooseNode(nodes: V1Node[], wanted: string | undefined, localNames: ReadonlySet<string> = new Set()): ChosenNode {
  const chosen = (n: V1Node): ChosenNode => ({name: n.metadata!.name!, taints: n.spec?.taints ?? [], allowedNamespaces: allowedOn(n)})
  if (wanted !== undefined) {
    const node = nodes.find((n) => n.metadata?.name === wanted)
    if (!node) throw new UserError(`node "${wanted}" not found`)
    if (!isVnode(node)) throw new UserError(`node "${wanted}" is not a vnode node (no ${NodeMarkerLabel} label): dev runs your command on a node of \`kubectl vnode up\``)
    if (!isReady(node)) throw new UserError(`node "${wanted}" is not Ready: is \`kubectl vnode up\` running for it?`)
    return chosen(node)
  }
  const vnodes = nodes.filter(isVnode)
  if (vnodes.length === 0) throw new UserError('no vnode node in this cluster: start one with `kubectl vnode up`')
  const ready = vnodes.filter(isReady)
  if (ready.length === 0) throw new UserError(`no vnode node is Ready (${names(vnodes)}): is \`kubectl vnode up\` running?`)
  // Several: the one whose `up` runs on this host (its state dir under this user's base), when only one does.
  const local = ready.filter((n) => localNames.has(n.metadata!.name!))
  if (ready.length > 1 && local.length !== 1) throw new UserError(`several vnode nodes are Ready (${names(ready)}): choose one with --node`)
  return chosen(ready.length === 1 ? ready[0] : local[0])
}

function names(nodes: V1Node[]): string {
  return nodes.map((n) => n.metadata?.name).join(', ')
}

/** The cluster's nodes (a vnode node is told by its label), and the choice among them. */
export async function findNode(session: KubeSession, wanted: string | undefined): Promise<ChosenNode> {
  const list = await session.core.listNode(wanted === undefined ? {labelSelector: `${NodeMarkerLabel}=true`} : {fieldSelector: `metadata.name=${wanted}`})
  return chooseNode(list.items, wanted, localNodeNames())
}

/** Nodes `up` ran on this host with their default state dir (`<state base>/nodes/<name>`). */
function localNodeNames(): Set<string> {
  try {
    return new Set(readdirSync(nodesStateDir()))
  } catch {
    return new Set()
  }
}
