/**
 * vnode's own keys on the API objects it touches: the vocabulary the node
 * writes and the CLI, kubectl-style printing and the UI read.
 */
const LabelPrefix = 'vnode.dev'
/** On the Node: this is a vnode node. */
export const NodeMarkerLabel = `${LabelPrefix}/node`
export const LastAppliedStatusAnnotation = `${LabelPrefix}/last-applied-status`
export const CordonedByAnnotation = `${LabelPrefix}/cordoned`
/** On pods in the kubelet API's /runningpods/: `container=pid,...`. */
export const PodPidsAnnotation = `${LabelPrefix}/pids`
/** The node label saying which sandbox mode its pods run in. */
export const SandboxLabel = `${LabelPrefix}/sandbox`
/** The node label that says whether pods' resources are enforced (`v1`, `v2` or `none`). */
export const CgroupsLabel = `${LabelPrefix}/cgroups`
/** The same, set by `pods` on each pod it prints (the SANDBOX column). */
export const PodSandboxAnnotation = SandboxLabel
/** The node annotation listing the walls its pods get (runtime/sandbox/walls.ts). */
export const WallsAnnotation = `${LabelPrefix}/walls`
/** The same, set by `pods` on each pod it prints (the WALLS column). */
export const PodWallsAnnotation = WallsAnnotation
/** The node annotation saying where its pods' network is: `pod`, or `host: <why the pod network is off>`. */
export const PodNetworkAnnotation = `${LabelPrefix}/pod-network`
/** The node annotation naming the namespaces whose pods it runs (`a,b`), or `*` for every namespace (`up --allowed-namespaces`). */
export const AllowedNamespacesAnnotation = `${LabelPrefix}/allowed-namespaces`
/** On the Node: the relay pod (namespace/name) that carries the API server's connections to its kubelet API; absent when direct. */
export const RelayAnnotation = `${LabelPrefix}/relay`
/** On the Node: which serving certificate its kubelet API serves, `cluster` or `self-signed: <why>` (doctor names the cure). */
export const ServingCertAnnotation = `${LabelPrefix}/serving-cert`
/** The same, set by `pods` on each pod it prints (the ENDPOINT column): `direct`, or the relay pod. */
export const PodRelayAnnotation = RelayAnnotation

/** On a pod `kubectl vnode dev` made: `true`, so dev pods can be listed and cleaned up (`-l vnode.dev/dev`). */
export const DevPodLabel = `${LabelPrefix}/dev`
/** On a dev pod: the workload it stands for, as `kind/name` (deployment/web). */
export const DevWorkloadAnnotation = `${LabelPrefix}/dev-workload`
/**
 * On a pod: `<container>:<generation>`. The node restarts that container,
 * as for a changed definition (Killing, the grace period, restartCount + 1),
 * each time the value changes: `dev` bumps it when a watched file changes.
 */
export const RestartAnnotation = `${LabelPrefix}/restart`
/** On a workload `dev --replace` scaled to zero: what to restore (JSON, see cli/dev/replace.ts). */
export const DevReplacedAnnotation = `${LabelPrefix}/dev-replaced`
