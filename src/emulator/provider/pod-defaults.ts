/**
 * The API server's defaults for pod fields that the node relies on
 * (pkg/apis/core/v1/defaults.go); one definition for the pod workers, the
 * runtime, the static pod source and `kubectl vnode kill`.
 */

/** spec.terminationGracePeriodSeconds for a pod that sets none. */
export const DefaultTerminationGracePeriodSeconds = 30

/** A container whose end could not be observed: the kubelet's ContainerStatusUnknown, exit 137 (as SIGKILL). */
export const ContainerStatusUnknownReason = 'ContainerStatusUnknown'
export const ContainerStatusUnknownExitCode = 137
