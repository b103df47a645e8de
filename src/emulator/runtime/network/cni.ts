import {helpers} from '../process/helper-runner.js'

/**
 * Runs CNI plugins as the CNI spec has a runtime do it: one plugin binary
 * per call, the network config on stdin, the command and container in the
 * environment, the result (or error) as JSON on stdout. A conflist's
 * plugins run in order on ADD, each given the previous result, and in
 * reverse on DEL (libcni's chaining, which is all vnode needs of libcni).
 */

export const CniVersion = '1.0.0'
/** Where Debian's containernetworking-plugins installs the plugins. */
export const DefaultCniPath = '/usr/lib/cni'
export const DefaultCniTimeoutMs = 20_000

export interface CniInvocation {
  containerId: string
  netns: string
  ifName: string
  /** CNI_ARGS pairs, e.g. K8S_POD_NAMESPACE. */
  args?: Record<string, string>
}

export interface CniResult {
  cniVersion: string
  interfaces?: Array<{name: string; mac?: string; sandbox?: string}>
  ips?: Array<{address: string; gateway?: string; interface?: number}>
  routes?: Array<{dst: string; gw?: string}>
  [k: string]: unknown
}

export interface CniConfList {
  cniVersion: string
  name: string
  plugins: Array<Record<string, unknown> & {type: string}>
}

export class CniError extends Error {
  constructor(
    readonly plugin: string,
    readonly command: string,
    message: string,
  ) {
    super(`CNI ${plugin} ${command}: ${message}`)
  }
}

function cniArgs(args: Record<string, string> | undefined): string {
  return ['IgnoreUnknown=1', ...Object.entries(args ?? {}).map(([k, v]) => `${k}=${v}`)].join(';')
}

/** One plugin call; `program`: the binary to run when it is not the conf's type (an IPAM plugin given its main plugin's conf). */
async function runPlugin(cniPath: string, command: 'ADD' | 'DEL' | 'CHECK', conf: Record<string, unknown> & {type: string}, inv: CniInvocation, program = conf.type): Promise<CniResult | undefined> {
  const r = await helpers.run(`${cniPath}/${program}`, [], {
    input: JSON.stringify(conf),
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: inv.containerId,
      CNI_NETNS: inv.netns,
      CNI_IFNAME: inv.ifName,
      CNI_PATH: cniPath,
      CNI_ARGS: cniArgs(inv.args),
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    },
    timeoutMs: DefaultCniTimeoutMs,
  })
  const out = r.stdout.trim()
  if (r.exitCode !== 0) {
    let msg = r.stderr.trim() || out || (r.timedOut ? `timed out after ${DefaultCniTimeoutMs} ms` : `exit ${r.exitCode}`)
    try {
      const e = JSON.parse(out) as {msg?: string; details?: string}
      msg = [e.msg, e.details].filter(Boolean).join(': ') || msg
    } catch {
      /* not JSON: keep the text */
    }
    throw new CniError(program, command, msg)
  }
  return out ? (JSON.parse(out) as CniResult) : undefined
}

function pluginConf(list: CniConfList, plugin: CniConfList['plugins'][number], prevResult?: CniResult) {
  return {cniVersion: list.cniVersion, name: list.name, ...plugin, ...(prevResult ? {prevResult} : {})}
}

/** ADD through every plugin of the list; the last plugin's result. prevResult: what earlier plugins of the chain gave (a pool entry's). */
export async function cniAdd(list: CniConfList, inv: CniInvocation, cniPath = DefaultCniPath, prevResult?: CniResult): Promise<CniResult> {
  let result: CniResult | undefined = prevResult
  for (const p of list.plugins) result = (await runPlugin(cniPath, 'ADD', pluginConf(list, p, result), inv)) ?? result
  if (!result) throw new CniError(list.name, 'ADD', 'no result')
  return result
}

/**
 * The IPAM plugin of a bridge whose DEL would only delete its veth and then
 * call that IPAM plugin (no ipMasq rules, no MAC spoof check to remove):
 * the bridge plugin's own DEL is then a program start that does nothing the
 * namespace's deletion does not do. undefined for any other plugin.
 */
function ipamOfVethOnlyBridge(p: CniConfList['plugins'][number]): string | undefined {
  if (p.type !== 'bridge' || p.ipMasq === true || p.macspoofchk === true) return undefined
  const ipam = p.ipam as {type?: unknown} | undefined
  return typeof ipam?.type === 'string' ? ipam.type : ''
}

/** A DEL's two parts, each settled on its own (cniDel). */
export interface CniDelSteps {
  /** The plugins that act on the pod's interfaces (a portmap's rules), then the namespace: rejects with the first error. */
  interfacesGone: Promise<void>
  /** The address given back by the IPAM plugin of a veth-only bridge, run once interfacesGone settled: rejects with its error. */
  addressReturned: Promise<void>
}

/**
 * DEL through every plugin, last first, for an attachment whose network
 * namespace is deleted with it (`removeNamespace`, in the chain's place of
 * the bridge). A bridge that holds nothing but its veth and its address
 * (ipamOfVethOnlyBridge) is not run: its veth goes with the namespace, and
 * its address is given back by its IPAM plugin, run as the bridge runs it
 * (given the bridge's conf), after the namespace. One program per pod
 * instead of two on a stop: a burst of deletions spent most of vnode's
 * event loop starting plugins.
 *
 * The namespace's interfaces go when the kernel's cleanup of it runs,
 * shortly after, for many namespaces at once (the bridge plugin deletes its
 * veth synchronously, about 20 ms of the kernel's RCU waits per link here,
 * one at a time). Until then the address given back may still be on the
 * dying namespace's eth0: host-local hands addresses out in turn over the
 * range, so it is leased again only once that turn comes round to it,
 * after every free address ahead of it.
 *
 * The DEL is two parts, each settled on its own (CniDelSteps): the pod's
 * interfaces and namespace, which its end waits for, then its address,
 * which may follow it. Every step runs even when one fails (a half-made
 * attachment must still give its lease back); each part rejects with its
 * first error.
 */
export function cniDel(list: CniConfList, inv: CniInvocation, prevResult: CniResult | undefined, removeNamespace: () => Promise<void>, cniPath = DefaultCniPath): CniDelSteps {
  const reversed = [...list.plugins].reverse()
  const inTurn = async (steps: Array<() => Promise<unknown>>) => {
    let first: unknown
    for (const step of steps) await step().catch((error: unknown) => void (first ??= error))
    if (first) throw first
  }
  const interfacesGone = inTurn([...reversed.filter((p) => ipamOfVethOnlyBridge(p) === undefined).map((p) => () => runPlugin(cniPath, 'DEL', pluginConf(list, p, prevResult), inv)), removeNamespace])
  const ipams = reversed.flatMap((p) => {
    const ipam = ipamOfVethOnlyBridge(p)
    return ipam ? [() => runPlugin(cniPath, 'DEL', pluginConf(list, p, prevResult), inv, ipam)] : []
  })
  const addressReturned = interfacesGone.then(
    () => inTurn(ipams),
    () => inTurn(ipams),
  )
  return {interfacesGone, addressReturned}
}
