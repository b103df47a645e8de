/**
 * The reasons of the events the node records, in one place as the kubelet
 * keeps them (pkg/kubelet/events/event.go), plus vnode's own for what has no
 * kubelet counterpart. Readers of events (`kubectl vnode kill`) use the same.
 */
export const EventReason = {
  // Containers (the kubelet's container events).
  CreatedContainer: 'Created',
  StartedContainer: 'Started',
  FailedToStartContainer: 'Failed',
  KillingContainer: 'Killing',
  BackOffStartContainer: 'BackOff',
  ExceededGracePeriod: 'ExceededGracePeriod',
  PulledImage: 'Pulled',
  // Pods.
  FailedKillPod: 'FailedKillPod',
  FailedSync: 'FailedSync',
  FailedMountVolume: 'FailedMount',
  DeadlineExceeded: 'DeadlineExceeded',
  // The eviction manager (pkg/kubelet/eviction: its events' reason).
  Evicted: 'Evicted',
  // Probes and hooks.
  ContainerUnhealthy: 'Unhealthy',
  ContainerProbeWarning: 'ProbeWarning',
  FailedPostStartHook: 'FailedPostStartHook',
  FailedPreStopHook: 'FailedPreStopHook',
  // The node.
  StartingKubelet: 'Starting',
  // vnode's own: the provider refused a pod, a static pod file is invalid.
  ProviderCreateFailed: 'ProviderCreateFailed',
  ProviderUpdateFailed: 'ProviderUpdateFailed',
  FailedValidation: 'FailedValidation',
} as const

export type EventReasonName = (typeof EventReason)[keyof typeof EventReason]
