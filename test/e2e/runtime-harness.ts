import type {CoreV1Event, V1Pod} from '@kubernetes/client-node'
import {mkdtempSync} from 'node:fs'
import {join} from 'node:path'
import {EventRecorder} from '../../src/emulator/kube/events.js'
import {type KubeClients, makeClients, type RequestCounter} from '../../src/emulator/kube/client.js'
import {ObjectManager} from '../../src/emulator/kube/object-manager.js'
import {ServiceLister} from '../../src/emulator/kube/service-lister.js'
import {ProcessProvider, type ProcessProviderOptions} from '../../src/emulator/runtime/process-provider.js'
import {clients, type Clients, createNamespace, deleteNamespace, kubeconfigPath, runDir, uniqueName, waitFor} from './helpers.js'

export {NODE, nodeContainer} from './helpers.js'

/**
 * A ProcessProvider wired to the real API server (ConfigMaps, Secrets,
 * Services and events are real), with pods created in the API first so
 * they carry real UIDs and defaults. The pod core is not involved: the test
 * plays it, calling the provider and watching what notifyPods reports.
 */
export class RuntimeHarness {
  readonly latest = new Map<string, V1Pod>()
  readonly reports: V1Pod[] = []
  /** When each report came (epoch ms), in the order of reports. */
  readonly reportedAt: number[] = []
  readonly nodeName = uniqueName('rtnode')
  stateDir!: string
  ns!: string
  c!: Clients
  provider!: ProcessProvider
  recorder!: EventRecorder
  services!: ServiceLister
  objects!: ObjectManager
  /** The object manager's clients, counted as the node's are: its lists and watches. */
  nodeClients!: KubeClients
  get counter(): RequestCounter {
    return this.nodeClients.counter
  }

  async setUp(opts: ProcessProviderOptions = {}): Promise<this> {
    this.c = await clients()
    this.ns = uniqueName('rt')
    await createNamespace(this.c.core, this.ns)
    this.stateDir = mkdtempSync(join(runDir(), 'runtime-'))
    this.recorder = new EventRecorder(this.c.core, this.nodeName)
    this.services = new ServiceLister(this.c.core, this.c.kc)
    this.services.start()
    this.nodeClients = await makeClients({kubeconfig: kubeconfigPath()})
    this.objects = new ObjectManager(this.nodeClients.core, this.nodeClients.kc, this.nodeClients.counter)
    this.provider = new ProcessProvider(
      {
        nodeName: this.nodeName,
        nodeIP: '127.0.0.1',
        stateDir: this.stateDir,
        core: this.c.core,
        services: this.services,
        objects: this.objects,
        recorder: this.recorder,
        knownPod: (namespace, name) => (namespace === this.ns ? this.latest.get(name) : undefined),
      },
      opts,
    )
    this.provider.notifyPods((p) => {
      this.latest.set(p.metadata!.name!, p)
      this.reports.push(p)
      this.reportedAt.push(Date.now())
    })
    return this
  }

  async tearDown(): Promise<void> {
    await this.provider?.close()
    await this.services?.stop()
    await this.objects?.stop()
    this.nodeClients?.close()
    if (this.ns) await deleteNamespace(this.c.core, this.ns)
  }

  /** Creates the pod in the API, bound to this node. */
  async apiPod(pod: V1Pod): Promise<V1Pod> {
    const body: V1Pod = {...pod, metadata: {...pod.metadata, namespace: this.ns}, spec: {automountServiceAccountToken: false, ...pod.spec!, nodeName: this.nodeName}}
    return this.c.core.createNamespacedPod({namespace: this.ns, body})
  }

  /** apiPod + provider.createPod. */
  async run(pod: V1Pod): Promise<V1Pod> {
    const created = await this.apiPod(pod)
    await this.provider.createPod(structuredClone(created))
    return created
  }

  status(name: string) {
    return this.latest.get(name)?.status
  }

  container(name: string, container: string) {
    const s = this.status(name)
    return [...(s?.initContainerStatuses ?? []), ...(s?.containerStatuses ?? [])].find((c) => c.name === container)
  }

  waitContainer(name: string, container: string, pred: (c: NonNullable<ReturnType<RuntimeHarness['container']>>) => boolean, what: string, timeoutMs = 20_000) {
    return waitFor(
      () => {
        const c = this.container(name, container)
        return c && pred(c) ? c : undefined
      },
      () => `${what} (last: ${JSON.stringify(this.container(name, container))})`,
      timeoutMs,
      50,
    )
  }

  async events(name: string): Promise<CoreV1Event[]> {
    const list = await this.c.core.listNamespacedEvent({namespace: this.ns})
    return list.items.filter((e) => e.involvedObject.name === name)
  }

  async waitEvent(name: string, pred: (e: CoreV1Event) => boolean, what: string, timeoutMs = 15_000): Promise<CoreV1Event> {
    return waitFor(async () => (await this.events(name)).find(pred), what, timeoutMs, 200)
  }
}
