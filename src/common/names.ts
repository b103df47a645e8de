/**
 * Name rules for values that end up in file paths (namespace, pod and
 * container names, UIDs): the Kubernetes DNS label and subdomain rules, which
 * admit no '/', no leading '.', and so no traversal.
 */

const DnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const DnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const Uid = /^[A-Za-z0-9-]{1,64}$/

export function isDnsLabel(s: string): boolean {
  return s.length <= 63 && DnsLabel.test(s)
}

export function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 && DnsSubdomain.test(s)
}

export function isUid(s: string): boolean {
  return Uid.test(s)
}
