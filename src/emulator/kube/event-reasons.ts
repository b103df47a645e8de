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
  ErrImageNeverPull: 'ErrImageNeverPull',
  // Pods.
  FailedKillPod: 'FailedKillPod',
  FailedSync: 'FailedSync',
  FailedMountVolume: 'FailedMount',
  DeadlineExceeded: 'DeadlineExceeded',
  FailedCreatePodSandBox: 'FailedCreatePodSandBox',
  InvalidEnvironmentVariableNames: 'InvalidEnvironmentVariableNames',
  // In-place resize (the kubelet's pod resize events).
  ResizeCompleted: 'ResizeCompleted',
  // The eviction manager (pkg/kubelet/eviction: its events' reason).
  Evicted: 'Evicted',
  // Probes and hooks.
  ContainerUnhealthy: 'Unhealthy',
  ContainerProbeWarning: 'ProbeWarning',
  FailedPostStartHook: 'FailedPostStartHook',
  FailedPreStopHook: 'FailedPreStopHook',
  // Admission (lifecycle/predicate.go and the shutdown manager): a refused pod's reason, also its event's.
  UnexpectedAdmissionError: 'UnexpectedAdmissionError',
  NodeAffinity: 'NodeAffinity',
  NodeName: 'NodeName',
  NodePorts: 'NodePorts',
  TaintToleration: 'TaintToleration',
  NodeShutdown: 'NodeShutdown',
  // The node, and each change of its conditions (the kubelet's nodestatus setters).
  StartingKubelet: 'Starting',
  NodeHasSufficientMemory: 'NodeHasSufficientMemory',
  NodeHasInsufficientMemory: 'NodeHasInsufficientMemory',
  NodeHasNoDiskPressure: 'NodeHasNoDiskPressure',
  NodeHasDiskPressure: 'NodeHasDiskPressure',
  NodeHasSufficientPID: 'NodeHasSufficientPID',
  NodeHasInsufficientPID: 'NodeHasInsufficientPID',
  NodeReady: 'NodeReady',
  NodeNotReady: 'NodeNotReady',
  // vnode's own: the provider refused a pod, a static pod file is invalid, a hostPort is taken on the
  // host, a limit the node's cgroups cannot enforce, a pod from a namespace the node does not run.
  ProviderCreateFailed: 'ProviderCreateFailed',
  ProviderUpdateFailed: 'ProviderUpdateFailed',
  FailedValidation: 'FailedValidation',
  PortInUse: 'PortInUse',
  LimitsNotEnforced: 'LimitsNotEnforced',
  NamespaceNotAllowed: 'NamespaceNotAllowed',
  // The node: pods use the host's resolvers, since the cluster DNS is not this cluster's here.
  ClusterDnsUnavailable: 'ClusterDNSUnavailable',
} as const

/** The admission reason for a resource the node lacks: "OutOf" and its name, as the kubelet's (OutOfcpu, OutOfpods). */
export function outOfResourceReason(resource: string): string {
  return `OutOf${resource}`
}

/**
 * virtual-kubelet's reasons for the ConfigMaps and Secrets a container's
 * environment refers to (internal/podutils/env.go), emitted only with `up
 * --virtual-kubelet-events`, beside the kubelet's own events: tools and
 * suites built on virtual-kubelet wait for them.
 */
export const VirtualKubeletEventReason = {
  OptionalConfigMapNotFound: 'OptionalConfigMapNotFound',
  OptionalConfigMapKeyNotFound: 'OptionalConfigMapKeyNotFound',
  FailedToReadOptionalConfigMap: 'FailedToReadOptionalConfigMap',
  OptionalSecretNotFound: 'OptionalSecretNotFound',
  OptionalSecretKeyNotFound: 'OptionalSecretKeyNotFound',
  FailedToReadOptionalSecret: 'FailedToReadOptionalSecret',
  MandatoryConfigMapNotFound: 'MandatoryConfigMapNotFound',
  MandatoryConfigMapKeyNotFound: 'MandatoryConfigMapKeyNotFound',
  FailedToReadMandatoryConfigMap: 'FailedToReadMandatoryConfigMap',
  MandatorySecretNotFound: 'MandatorySecretNotFound',
  MandatorySecretKeyNotFound: 'MandatorySecretKeyNotFound',
  FailedToReadMandatorySecret: 'FailedToReadMandatorySecret',
} as const
