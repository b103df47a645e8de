import type {V1Taint} from '@kubernetes/client-node'
import {EventEmitter} from 'node:events'
import {mkdir} from 'node:fs/promises'
import {homedir, hostname} from 'node:os'
import {join} from 'node:path'
import {freePort, portOr} from '../cluster/ports.js'
import {UserError} from '../errors.js'
import {makeClients, type KubeClients, type KubeOptions} from './kube/client.js'
import {describeApiError} from './kube/errors.js'
import {EventRecorder, type RecordedEvent} from './kube/events.js'
import {chooseNodeIP} from './node/addresses.js'
import {goArch} from './node/host.js'
import {LeaseController} from './node/lease-controller.js'
import {NodeController, type NodeSnapshot} from './node/node-controller.js'
import {DefaultMaxPods, DefaultTaint, NodeMarkerLabel, type NodeSpecConfig} from './node/node-status.js'
import {parseQuantity} from './quantity.js'
import {VnodeVersion, TargetKubernetesVersion} from './version.js'
import type {AuthorizationMode} from './server/auth.js'
import {loadClientCa} from './server/client-ca.js'
import {apiReviewer} from './server/review-api.js'
import {KubeletServer} from './server/server.js'
import type {KubeletSources} from './server/sources.js'
import {isDnsSubdomain} from './server/validate.js'

export const DefaultKubeletPort = 10250

export interface EmulatorOptions extends KubeOptions {
  name: string
  labels?: Record<string, string>
  taints?: V1Taint[]
  defaultTaint?: boolean
  cpu?: string
  memory?: string
  pods?: number
  nodeIP?: string
  port?: number
  stateDir?: string
  reregister?: boolean
  leaseRenewIntervalMs?: number
  statusCheckIntervalMs?: number
  /** Kubelet API: let unauthenticated requests through as system:anonymous (default false). */
  anonymousAuth?: boolean
  /** Kubelet API: Webhook (SubjectAccessReview, the default) or AlwaysAllow. */
  authorizationMode?: AuthorizationMode
  /** Kubelet API: CA for client certificates (default: the kubeconfig's cluster CA). */
  clientCaFile?: string
  /** What the kubelet API serves; until the pod core provides them, the node has no pods. */
  kubelet?: Partial<KubeletSources>
}

export type StartupStep = 'connect' | 'register' | 'ready'

export interface EmulatorEvents {
  step: [step: StartupStep, detail: string]
  node: [snapshot: NodeSnapshot]
  lease: [renewedAt: Date]
  event: [event: RecordedEvent]
  error: [message: string]
  stopping: [detail: string]
}

export function defaultStateDir(name: string): string {
  const base = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state')
  return join(base, 'kubectl-vnode', 'nodes', name)
}

/** The Kubernetes node name rules: a DNS subdomain. */
export function validateNodeName(name: string): void {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name) || name.length > 253) {
    throw new UserError(`invalid node name "${name}": must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')`)
  }
}

/**
 * One emulated node: wires the kube clients, node controller and lease
 * together, and offers a read-only feed of its state to whatever renders it.
 */
export class Emulator extends EventEmitter<EmulatorEvents> {
  private clients!: KubeClients
  private recorder!: EventRecorder
  private nodeController!: NodeController
  private lease!: LeaseController
  private kubeletServer: KubeletServer | undefined
  private readonly abort = new AbortController()
  private loops: Promise<void>[] = []
  readonly startedAt = new Date()
  lastLeaseRenewal: Date | undefined
  serverVersion = ''
  stateDir: string

  constructor(readonly opts: EmulatorOptions) {
    super()
    validateNodeName(opts.name)
    this.stateDir = opts.stateDir ?? defaultStateDir(opts.name)
  }

  get server(): string {
    return this.clients?.server ?? ''
  }

  get requestCount(): number {
    return this.clients?.counter.total ?? 0
  }

  node(): NodeSnapshot | undefined {
    return this.nodeController?.snapshot()
  }

  private async nodeConfig(): Promise<NodeSpecConfig> {
    const o = this.opts
    const parse = (flag: string, v: string) => {
      try {
        return parseQuantity(v)
      } catch {
        throw new UserError(`invalid ${flag} "${v}": expected a Kubernetes quantity such as 4, 500m, 8Gi`)
      }
    }
    return {
      name: o.name,
      nodeIP: await chooseNodeIP(this.clients.server, o.nodeIP),
      port: o.port === 0 ? await freePort('0.0.0.0') : await portOr(o.port ?? DefaultKubeletPort, '0.0.0.0'),
      labels: {
        type: 'virtual-kubelet',
        'kubernetes.io/role': 'agent',
        'kubernetes.io/hostname': o.name,
        'kubernetes.io/os': process.platform,
        'kubernetes.io/arch': goArch(),
        'beta.kubernetes.io/os': process.platform,
        'beta.kubernetes.io/arch': goArch(),
        [NodeMarkerLabel]: 'true',
        ...o.labels,
      },
      taints: [...(o.defaultTaint === false ? [] : [DefaultTaint]), ...(o.taints ?? [])],
      cpu: o.cpu === undefined ? undefined : parse('--cpu', o.cpu),
      memoryBytes: o.memory === undefined ? undefined : parse('--memory', o.memory),
      pods: o.pods ?? DefaultMaxPods,
      kubeletVersion: `${TargetKubernetesVersion}-vnode.${VnodeVersion}`,
      runtimeVersion: `vnode://${VnodeVersion}`,
    }
  }

  /** Connect, register, report Ready, and keep the lease and status loops running. */
  async start(): Promise<void> {
    this.clients = await makeClients(this.opts)
    await this.connect()
    await mkdir(this.stateDir, {recursive: true, mode: 0o700})
    this.recorder = new EventRecorder(this.clients.core, this.opts.name)
    this.recorder.onEvent((e) => this.emit('event', e))
    const config = await this.nodeConfig()
    this.nodeController = new NodeController(this.clients.core, config, this.recorder, {
      stateDir: this.stateDir,
      reregister: this.opts.reregister,
      statusCheckIntervalMs: this.opts.statusCheckIntervalMs,
    })
    this.nodeController.on('change', (s: NodeSnapshot) => {
      this.emit('node', s)
      if (s.error) this.emit('error', s.error)
    })
    const node = await this.nodeController.register(this.abort.signal)
    this.emit('step', 'register', `node ${this.opts.name} registered (InternalIP ${config.nodeIP}, port ${config.port})`)
    await this.startKubeletServer(config)
    void this.recorder.record(this.nodeController.ref, 'Normal', 'Starting', 'Starting vnode.')
    this.lease = new LeaseController(this.clients.coordination, {name: this.opts.name, uid: node.metadata!.uid!}, {
      renewIntervalMs: this.opts.leaseRenewIntervalMs,
      onRenew: (at) => {
        this.lastLeaseRenewal = at
        this.emit('lease', at)
      },
      onError: (m) => this.emit('error', m),
      onLeaseLost: async () => {
        const n = await this.nodeController.ensureRegistered()
        return n ? {name: this.opts.name, uid: n.metadata!.uid!} : undefined
      },
    })
    // The first status write makes the node Ready; do it before the loops so `up` reports Ready at once.
    await this.nodeController.syncStatus(true)
    this.loops.push(this.lease.run(this.abort.signal), this.nodeController.run(this.abort.signal))
    this.emit('step', 'ready', `node ${this.opts.name} is Ready`)
  }

  /** The kubelet HTTPS API on the port the node advertises. */
  private async startKubeletServer(config: NodeSpecConfig): Promise<void> {
    const o = this.opts
    const host = hostname().toLowerCase()
    this.kubeletServer = new KubeletServer({
      nodeName: o.name,
      port: config.port,
      stateDir: this.stateDir,
      sans: [o.name, ...(isDnsSubdomain(host) ? [host] : []), config.nodeIP, 'localhost', '127.0.0.1'],
      sources: {pods: () => [], ...o.kubelet},
      anonymousAuth: o.anonymousAuth ?? false,
      authorizationMode: o.authorizationMode ?? 'Webhook',
      clientCa: await loadClientCa(this.clients.kc, o.clientCaFile),
      reviewer: apiReviewer(this.clients.authentication, this.clients.authorization),
    })
    await this.kubeletServer.start()
  }

  private async connect(): Promise<void> {
    const {k8s, kc} = this.clients
    try {
      const info = await kc.makeApiClient(k8s.VersionApi).getCode()
      this.serverVersion = info.gitVersion
    } catch (error) {
      throw new UserError(`cannot reach the API server at ${this.clients.server}: ${describeApiError(error)}`)
    }
    this.emit('step', 'connect', `connected to ${this.clients.server} (Kubernetes ${this.serverVersion})`)
  }

  /**
   * Stop: with rm, delete the Node and its Lease; otherwise report Ready=False
   * and cordon, leaving the Lease to expire as the kubelet does.
   */
  async stop(opts: {rm?: boolean} = {}): Promise<void> {
    this.abort.abort()
    await Promise.allSettled(this.loops)
    this.loops = []
    await this.kubeletServer?.stop()
    this.kubeletServer = undefined
    if (!this.nodeController) return
    try {
      if (opts.rm) {
        this.emit('stopping', 'deleting node and lease')
        await this.lease?.delete()
        await this.nodeController.deleteNode()
      } else {
        this.emit('stopping', 'marking node NotReady and cordoning it')
        await this.nodeController.markStopped()
      }
    } catch (error) {
      this.emit('error', `stopping: ${describeApiError(error)}`)
    }
  }
}

