/** vnode's own version, reported in nodeInfo.kubeletVersion and containerRuntimeVersion. */
export const VnodeVersion = '0.1.0'
/** The Kubernetes API version vnode is written against (@kubernetes/client-node 1.4 targets 1.34). */
export const TargetKubernetesVersion = 'v1.34.0'
