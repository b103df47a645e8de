// The node modes the benchmark puts side by side: each differs from the plain
// node by what its name says, so a ratio to plain is that feature's cost.
// Every flag is given, so a mode means the same on every host or default;
// `default` alone gives none, and says which mode the host gave it.

export const Modes = {
  /** Bare host processes, no cgroups, the host network. */
  plain: ['--sandbox', 'none', '--cgroups', 'none', '--pod-network', 'off'],
  /** A pod sandbox (mount, PID and UTS namespaces), with its filesystem walls: a writable layer per container, the hidden paths. */
  sandbox: ['--sandbox', 'namespaces', '--cgroups', 'none', '--pod-network', 'off'],
  /** The sandbox without its filesystem walls: no writable layer (the host read-only), only the state dir hidden. */
  'sandbox-bare': ['--sandbox', 'namespaces', '--fs-walls', 'off', '--cgroups', 'none', '--pod-network', 'off'],
  /** A cgroup per pod and container (v2, else v1). */
  cgroups: ['--sandbox', 'none', '--cgroups', 'auto', '--pod-network', 'off'],
  /** The sandbox with a network namespace and address per pod (the pod network needs the sandbox). */
  network: ['--sandbox', 'namespaces', '--cgroups', 'none', '--pod-network', 'on'],
  /** The node as users run it: no mode flag, so `up` picks what this host allows (here, as root: everything). */
  default: [],
  /** The node as users run it, with the pod network off: beside `default`, what the pod network costs there. */
  'default-host-network': ['--pod-network', 'off'],
  /** Everything a pod can get: the sandbox, cgroups and the pod network. */
  everything: ['--sandbox', 'namespaces', '--cgroups', 'auto', '--pod-network', 'on'],
}

/** The node labels (and the pod network's annotation) that say what a node runs its pods in (its mode as the node reports it). */
export const ModeLabels = {sandbox: 'vnode.dev/sandbox', cgroups: 'vnode.dev/cgroups', podNetwork: 'vnode.dev/pod-network'}

/**
 * Why a mode cannot run on this host, or undefined: cgroups and the pod
 * network need root here (no delegated cgroup v2 subtree on these hosts), and
 * a node that cannot have them would measure the plain mode under their name.
 */
export function modeUnavailable(mode) {
  const root = process.getuid?.() === 0
  if (!root && (mode === 'network' || mode === 'everything')) return 'the pod network needs root'
  if (!root && mode === 'cgroups') return 'cgroups need root or a delegated cgroup v2 subtree'
  return undefined
}
