/**
 * Cluster services built from the Go module proxy. metrics-server and CoreDNS
 * are built with `go install module@version`, from their own go.mod and
 * go.sum (checksums verified through the proxy's sumdb); kube-proxy is built
 * from controlplane/go.mod, so it has the control plane's Kubernetes version.
 */
export const MetricsServerModule = 'sigs.k8s.io/metrics-server/cmd/metrics-server'
export const MetricsServerVersion = 'v0.8.0'
export const CoreDnsModule = 'github.com/coredns/coredns'
/** The release whose client-go matches the control plane's minor (v0.34). */
export const CoreDnsVersion = 'v1.12.4'
export const KubeProxyPackage = 'k8s.io/kubernetes/cmd/kube-proxy'

export const ServiceBinaries = ['kube-proxy', 'metrics-server', 'coredns'] as const
export type ServiceBinary = (typeof ServiceBinaries)[number]
