import type {V1Pod} from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {hostname} from 'node:os'

/**
 * The per-pod files the kubelet writes for every container: /etc/hosts
 * (kubelet_pods.go managedHostsFileContent), /etc/resolv.conf (dns.go
 * GetPodDNS) and /etc/hostname, from the pod's hostname rules
 * (GeneratePodHostNameAndDomain).
 */
export const DefaultClusterDomain = 'cluster.local'
export const HostResolvConf = '/etc/resolv.conf'
export const HostHostsFile = '/etc/hosts'
/** The kubelet's limits on search domains (validation.MaxDNSSearchPaths) and hostname length. */
export const MaxDNSSearchPaths = 32
export const MaxHostnameLength = 63

export interface PodDNS {
  /** The cluster's DNS servers (the kubelet's --cluster-dns); none: ClusterFirst falls back to Default. */
  clusterDNS: string[]
  clusterDomain: string
}

export interface PodNames {
  hostname: string
  /** `<subdomain>.<namespace>.svc.<clusterDomain>`, when the pod has a subdomain. */
  domain?: string
}

export function podNames(pod: V1Pod, clusterDomain = DefaultClusterDomain): PodNames {
  let hostname = pod.spec?.hostname || pod.metadata?.name || ''
  if (hostname.length > MaxHostnameLength) hostname = hostname.slice(0, MaxHostnameLength).replace(/[-.]+$/, '')
  const sub = pod.spec?.subdomain
  return sub ? {hostname, domain: `${sub}.${pod.metadata?.namespace}.svc.${clusterDomain}`} : {hostname}
}

/** The container's hostname: the host's on the host network (its UTS namespace is the host's), else the FQDN with setHostnameAsFQDN, else the short name. */
export function containerHostname(pod: V1Pod, clusterDomain = DefaultClusterDomain): string {
  if (pod.spec?.hostNetwork) return hostname()
  const n = podNames(pod, clusterDomain)
  return pod.spec?.setHostnameAsFQDN && n.domain ? `${n.hostname}.${n.domain}` : n.hostname
}

export function hostsFile(pod: V1Pod, podIPs: string[], clusterDomain = DefaultClusterDomain, readHost = () => readFileSync(HostHostsFile, 'utf8')): string {
  const lines: string[] = []
  if (pod.spec?.hostNetwork) {
    lines.push('# Kubernetes-managed hosts file (host network).', readHost().replace(/\n$/, ''))
  } else {
    lines.push(
      '# Kubernetes-managed hosts file.',
      '127.0.0.1\tlocalhost',
      '::1\tlocalhost ip6-localhost ip6-loopback',
      'fe00::0\tip6-localnet',
      'fe00::0\tip6-mcastprefix',
      'fe00::1\tip6-allnodes',
      'fe00::2\tip6-allrouters',
    )
    const n = podNames(pod, clusterDomain)
    for (const ip of podIPs) lines.push(n.domain ? `${ip}\t${n.hostname}.${n.domain}\t${n.hostname}` : `${ip}\t${n.hostname}`)
  }
  const aliases = pod.spec?.hostAliases ?? []
  if (aliases.length > 0) {
    lines.push('', '# Entries added by HostAliases.')
    for (const a of aliases) lines.push(`${a.ip}\t${(a.hostnames ?? []).join('\t')}`)
  }
  return lines.join('\n') + '\n'
}

interface ResolvConf {
  nameservers: string[]
  searches: string[]
  options: string[]
}

export function parseResolvConf(text: string): ResolvConf {
  const out: ResolvConf = {nameservers: [], searches: [], options: []}
  for (const raw of text.split('\n')) {
    const [key, ...fields] = raw
      .replace(/[#;].*$/, '')
      .trim()
      .split(/\s+/)
    if (key === 'nameserver' && fields[0]) out.nameservers.push(fields[0])
    else if (key === 'search' || key === 'domain') out.searches = fields
    else if (key === 'options') out.options.push(...fields)
  }
  return out
}

function isClusterFirst(pod: V1Pod): boolean {
  const policy = pod.spec?.dnsPolicy ?? 'ClusterFirst'
  return policy === 'ClusterFirst' ? !pod.spec?.hostNetwork : policy === 'ClusterFirstWithHostNet'
}

export function resolvConf(pod: V1Pod, dns: PodDNS, readHost = () => readFileSync(HostResolvConf, 'utf8')): string {
  const policy = pod.spec?.dnsPolicy ?? 'ClusterFirst'
  let conf: ResolvConf
  if (policy === 'None') conf = {nameservers: [], searches: [], options: []}
  else if (isClusterFirst(pod) && dns.clusterDNS.length > 0) {
    const host = parseResolvConf(readHost())
    const ns = pod.metadata?.namespace ?? 'default'
    const d = dns.clusterDomain
    conf = {nameservers: [...dns.clusterDNS], searches: [`${ns}.svc.${d}`, `svc.${d}`, d, ...host.searches], options: ['ndots:5']}
  } else conf = parseResolvConf(readHost())
  const extra = pod.spec?.dnsConfig
  if (extra) {
    conf.nameservers = unique([...conf.nameservers, ...(extra.nameservers ?? [])])
    conf.searches = unique([...conf.searches, ...(extra.searches ?? [])])
    conf.options = mergeOptions(
      conf.options,
      (extra.options ?? []).map((o) => (o.value !== undefined ? `${o.name}:${o.value}` : (o.name ?? ''))),
    )
  }
  const lines: string[] = []
  if (conf.searches.length > 0) lines.push(`search ${conf.searches.slice(0, MaxDNSSearchPaths).join(' ')}`)
  for (const n of conf.nameservers) lines.push(`nameserver ${n}`)
  if (conf.options.length > 0) lines.push(`options ${conf.options.join(' ')}`)
  return lines.join('\n') + '\n'
}

function unique(xs: string[]): string[] {
  return [...new Set(xs.filter(Boolean))]
}

/** dnsConfig options replace options of the same name (the kubelet's mergeDNSOptions). */
function mergeOptions(base: string[], extra: string[]): string[] {
  const byName = new Map<string, string>()
  for (const o of [...base, ...extra]) if (o) byName.set(o.split(':')[0], o)
  return [...byName.values()]
}
