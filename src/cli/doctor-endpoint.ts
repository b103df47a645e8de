import type {Reach} from '../emulator/relay/reach.js'
import type {DoctorCheck} from '../kubectl/doctor-report.js'

/**
 * Doctor's verdicts on the way from the API server to a node's kubelet API
 * (logs, exec, attach, port-forward, metrics): whether `up --relay` can make
 * a relay here, and, for each vnode node in the cluster, the known failure
 * the API server's own answer names, with its fix. Pure: tested without a
 * cluster.
 */

export type RelayRequest = 'auto' | 'on' | 'off'

export interface NodeEndpointFacts {
  name: string
  /** The relay pod (namespace/name) when the node is behind one. */
  relay?: string
  /** Its InternalIP and kubelet port, as published. */
  address?: string
  port?: number
  /** A Hostname address other than the InternalIP, which an API server dials first by default. */
  hostname?: string
  /** What the API server answered when asked to reach it (GET nodes/<node>/proxy/healthz). */
  reach: Reach
  /** Which serving certificate the node says it serves (its vnode.dev/serving-cert annotation): `cluster`, or `self-signed: <why>`. */
  servingCert?: string
}

export interface RelayFacts {
  namespace: string
  /** What the relay needs that this user may not do there, as `verb resource`. */
  denied: string[]
  /** Nodes a relay pod without tolerations can be scheduled to (Ready, schedulable, no NoSchedule/NoExecute taint); undefined when this user may not list nodes. */
  schedulable?: number
}

/** The kubelet port, which firewalls between API servers and nodes let through beside 443. */
const KubeletPort = 10250
const EndpointCost = 'kubectl logs, exec, attach, port-forward and kubectl top do not reach the pods of this node'

/** `--relay`'s row: what up would do, and whether it can make a relay pod in this cluster. */
export function relayCheck(relay: RelayRequest, loopback: boolean, facts: RelayFacts | undefined): DoctorCheck {
  const base = {id: 'relay', capability: 'relay for remote clusters'} as const
  if (relay === 'off') {
    return {
      ...base,
      verdict: 'off',
      why: 'asked for with --relay off: the API server must reach the node IP and kubelet port itself',
      cost: `where it cannot, ${EndpointCost}`,
      fix: {text: 'drop --relay off'},
    }
  }
  const auto = 'up --relay auto asks the API server to reach the node after registration and uses a relay pod when it does not'
  if (relay === 'auto' && loopback) return {...base, verdict: 'ok', why: `not needed here: the API server is on this host and reaches the kubelet port itself (${auto})`}
  if (!facts) return {...base, verdict: 'missing', why: 'not known: the cluster cannot be reached (see cluster)'}
  const problems: string[] = []
  const fixes: string[] = []
  if (facts.denied.length) {
    problems.push(`this user may not ${facts.denied.join(', ')} in namespace ${facts.namespace}`)
    fixes.push(`a Role in ${facts.namespace} allowing ${facts.denied.join(', ')}, or --relay-namespace a namespace where you may`)
  }
  if (facts.schedulable === 0) {
    problems.push('no node can run the relay pod (none Ready and schedulable without a NoSchedule taint)')
    fixes.push('a Ready node without taints, or --relay-node-selector one the relay may run on')
  }
  if (problems.length === 0) {
    const nodes = facts.schedulable === undefined ? 'which nodes may run it is not known (this user may not list nodes)' : `${facts.schedulable} node${facts.schedulable === 1 ? '' : 's'} may run it`
    return {...base, verdict: 'ok', why: `${relay === 'on' ? 'up --relay on makes a relay pod' : auto}: this user may make it in ${facts.namespace}, and ${nodes}`}
  }
  return {
    ...base,
    verdict: 'missing',
    why: problems.join('; '),
    cost: `up cannot make a relay: where the API server cannot reach this host, ${EndpointCost}`,
    fix: {text: fixes.join('; ')},
    unmet: relay === 'on',
  }
}

/** A node's row: reached (direct or through its relay), or the failure the API server's answer names, with its fix. */
export function endpointCheck(n: NodeEndpointFacts): DoctorCheck {
  const base = {id: 'kubelet-endpoint', capability: `node ${n.name}`} as const
  const at = `${n.address ?? '(no InternalIP)'}:${n.port ?? '?'}`
  if (n.reach.unknown) return {...base, verdict: 'missing', why: `cannot tell: ${n.reach.why}`, fix: {text: 'check with a user allowed to get nodes/proxy'}}
  if (n.reach.reachable) return {...base, verdict: 'ok', why: `the API server reaches its kubelet API at ${at}${n.relay ? ` through the relay ${n.relay}` : ' directly'}`}
  const failed = (why: string, fix: DoctorCheck['fix']): DoctorCheck => ({...base, verdict: 'missing', why, cost: EndpointCost, fix})
  const message = n.reach.why
  if (/x509|certificate|tls: /i.test(message)) return certificateRefused(n, message, failed)
  if (n.hostname && (/address not allowed|no addresses for hostname/.test(message) || message.includes(`lookup ${n.hostname}`))) {
    return failed(`the API server dials the node's Hostname address ${n.hostname} first (--kubelet-preferred-address-types), which it cannot use: ${message}`, {
      text: 'a node without a Hostname address (the relay publishes its IP only), or an API server that prefers InternalIP',
      command: 'kubectl vnode up --relay on',
    })
  }
  if (n.reach.status === 502) {
    return failed(`the API server's egress tunnel answered 502 (Bad Gateway): it carries connections only to nodes of its own agents (k3s --egress-selector-mode agent or cluster): ${message}`, {
      text: 'start the k3s server with --egress-selector-mode disabled (or pod), so the API server dials the node or its relay itself',
    })
  }
  if (n.relay) {
    const [ns, pod] = n.relay.split('/')
    return failed(`the relay ${n.relay} at ${at} does not answer: ${message}`, {
      text: 'vnode makes the relay pod again within seconds while up runs; see why it does not run',
      command: `kubectl -n ${ns} describe pod ${pod}`,
    })
  }
  const firewall =
    n.port !== undefined && n.port !== KubeletPort && n.port !== 443 ? ` (a firewall that lets only 443 and ${KubeletPort} through stops port ${n.port}: --port ${KubeletPort} may pass it)` : ''
  return failed(`the API server cannot reach ${at}: ${message}`, {text: `a relay pod in the cluster carries the API server's connections${firewall}`, command: 'kubectl vnode up --relay on'})
}

const SkipVerify = 'kubectl logs --insecure-skip-tls-verify-backend <pod>'

/**
 * The API server verifies kubelet serving certificates and refuses the
 * node's: what the node says of its own (its annotation) names the cure.
 */
function certificateRefused(n: NodeEndpointFacts, message: string, failed: (why: string, fix: DoctorCheck['fix']) => DoctorCheck): DoctorCheck {
  const why = `the API server verifies kubelet serving certificates (--kubelet-certificate-authority) and rejects the node's: ${message}`
  const self = n.servingCert?.startsWith('self-signed: ') ? n.servingCert.slice('self-signed: '.length) : undefined
  const csr = self ? /\bCSR (\S+)/.exec(self)?.[1] : undefined
  if (self && /approved but not issued/.test(self)) {
    return failed(
      `${why}; the cluster approved the node's kubelet-serving CSR but never issued it (${self}): its signer does not sign kubelet-serving certificates for this node, as EKS signs them only for the nodes it made`,
      {
        text: 'this cluster issues no serving certificate for the node: the only way is to skip the check per request',
        command: SkipVerify,
      },
    )
  }
  if (self && csr && /not approved/.test(self)) {
    return failed(`${why}; the node's kubelet-serving CSR ${csr} was never approved (${self})`, {
      text: "someone allowed to approve kubelet-serving CSRs approves it (then up --serving-cert auto serves the cluster's), or skip the check per request",
      command: `kubectl certificate approve ${csr}`,
    })
  }
  return failed(why, {
    text: "the node's serving certificate is self-signed: up --serving-cert auto (the default) or csr gets one the cluster signs where it issues kubelet-serving certificates (a CSR your user, or an approver, approves); where it does not, the only way is to skip the check per request",
    command: SkipVerify,
  })
}
