import {SerialRunner} from '../../common/serial-runner.js'
import {allContainers, podKeyOf} from '../../common/pods.js'
import {loadYaml, type V1Pod} from '@kubernetes/client-node'
import {ObjectSerializer} from '@kubernetes/client-node/dist/serializer.js'
import {createHash} from 'node:crypto'
import {type FSWatcher, watch} from 'node:fs'
import {open, readdir, stat} from 'node:fs/promises'
import {join} from 'node:path'
import {ConfigHashAnnotation} from './config.js'
import {DefaultTerminationGracePeriodSeconds} from '../provider/pod-defaults.js'

/** The kubelet's fileCheckFrequency: the directory is listed again this often, besides the change notifications. */
export const DefaultFileCheckIntervalMs = 20_000
/** Change notifications come in bursts (an editor writes, renames, chmods): one relist after this quiet time. */
export const DefaultFileDebounceMs = 100
/** The kubelet's maxConfigLength. */
export const MaxManifestBytes = 10 * 1024 * 1024
export const DefaultStaticNamespace = 'default'

/** A manifest file that was skipped, and why. */
export interface ManifestProblem {
  file: string
  message: string
}

export interface ManifestListing {
  pods: V1Pod[]
  problems: ManifestProblem[]
  /** The directory does not exist (still a complete, empty listing). */
  missing: boolean
}

class ManifestError extends Error {}

const DnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const DnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

/** generatePodName: static pods carry the node name so two nodes' copies never collide in the API. */
export function staticPodName(name: string, nodeName: string): string {
  return `${name}-${nodeName.toLowerCase()}`
}

/** JSON with sorted keys: the hash depends on the pod, not on how the file spells it. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

/** The static pod UID: a hash of the pod as decoded, the node and the file (config/common.go applyDefaults). */
export function staticPodUID(pod: V1Pod, nodeName: string, path: string): string {
  const h = createHash('sha256')
  h.update(canonical(ObjectSerializer.serialize(pod, 'V1Pod')))
  h.update(`host:${nodeName}`)
  h.update(`file:${path}`)
  return h.digest('hex').slice(0, 32)
}

/** The API server's defaults that the workers and the status builder rely on (the kubelet decodes with them applied). */
function applyApiDefaults(pod: V1Pod): void {
  const spec = pod.spec!
  spec.restartPolicy ??= 'Always'
  spec.terminationGracePeriodSeconds ??= DefaultTerminationGracePeriodSeconds
  spec.dnsPolicy ??= 'ClusterFirst'
  spec.schedulerName ??= 'default-scheduler'
  for (const c of allContainers({spec})) {
    c.terminationMessagePath ??= '/dev/termination-log'
    c.terminationMessagePolicy ??= 'File'
    if (!c.imagePullPolicy) {
      const image = c.image ?? ''
      const tag = image.includes('@') ? 'digest' : /:[^/]+$/.exec(image)?.[0].slice(1)
      c.imagePullPolicy = !tag || tag === 'latest' ? 'Always' : 'IfNotPresent'
    }
    for (const p of c.ports ?? []) p.protocol ??= 'TCP'
  }
}

/**
 * The references the kubelet refuses in static pods: a static pod runs
 * without the API server, so it may not depend on API objects (and the API
 * server refuses such mirror pods anyway).
 */
export function staticPodReferences(pod: V1Pod): string | undefined {
  const spec = pod.spec
  if (!spec) return undefined
  const refuse = (what: string, field: string) => `${field}: static pods may not reference ${what}`
  if (spec.serviceAccountName) return refuse('serviceaccounts', 'spec.serviceAccountName')
  if (spec.imagePullSecrets?.length) return refuse('secrets', 'spec.imagePullSecrets')
  if (spec.resourceClaims?.length) return refuse('resourceclaims', 'spec.resourceClaims')
  for (const [i, v] of (spec.volumes ?? []).entries()) {
    const at = `spec.volumes[${i}]`
    if (v.secret) return refuse('secrets', `${at}.secret`)
    if (v.configMap) return refuse('configmaps', `${at}.configMap`)
    if (v.persistentVolumeClaim) return refuse('persistentvolumeclaims', `${at}.persistentVolumeClaim`)
    if (v.ephemeral) return refuse('persistentvolumeclaims', `${at}.ephemeral`)
    for (const [j, s] of (v.projected?.sources ?? []).entries()) {
      const src = `${at}.projected.sources[${j}]`
      if (s.secret) return refuse('secrets', `${src}.secret`)
      if (s.configMap) return refuse('configmaps', `${src}.configMap`)
      if (s.serviceAccountToken) return refuse('serviceaccounts', `${src}.serviceAccountToken`)
      if (s.clusterTrustBundle) return refuse('clustertrustbundles', `${src}.clusterTrustBundle`)
    }
  }
  const containers = [
    ...(spec.initContainers ?? []).map((c, i) => [c, `spec.initContainers[${i}]`] as const),
    ...spec.containers.map((c, i) => [c, `spec.containers[${i}]`] as const),
    ...(spec.ephemeralContainers ?? []).map((c, i) => [c, `spec.ephemeralContainers[${i}]`] as const),
  ]
  for (const [c, at] of containers) {
    for (const [j, e] of (c.envFrom ?? []).entries()) {
      if (e.secretRef) return refuse('secrets', `${at}.envFrom[${j}].secretRef`)
      if (e.configMapRef) return refuse('configmaps', `${at}.envFrom[${j}].configMapRef`)
    }
    for (const [j, e] of (c.env ?? []).entries()) {
      if (e.valueFrom?.secretKeyRef) return refuse('secrets', `${at}.env[${j}].valueFrom.secretKeyRef`)
      if (e.valueFrom?.configMapKeyRef) return refuse('configmaps', `${at}.env[${j}].valueFrom.configMapKeyRef`)
    }
  }
  return undefined
}

/** The part of ValidatePodCreate a process-based node needs: names, containers, images, restart policy. */
export function validateStaticPod(pod: V1Pod): string | undefined {
  const name = pod.metadata?.name ?? ''
  if (name.length > 253 || !DnsSubdomain.test(name)) return `metadata.name: invalid value "${name}": must be a lowercase DNS subdomain`
  const ns = pod.metadata?.namespace ?? ''
  if (ns.length > 63 || !DnsLabel.test(ns)) return `metadata.namespace: invalid value "${ns}": must be a lowercase DNS label`
  const spec = pod.spec
  if (!spec?.containers?.length) return 'spec.containers: Required value'
  const names = new Set<string>()
  for (const [list, field] of [
    [spec.initContainers ?? [], 'spec.initContainers'],
    [spec.containers, 'spec.containers'],
  ] as const) {
    for (const [i, c] of list.entries()) {
      if (!c.name || c.name.length > 63 || !DnsLabel.test(c.name)) return `${field}[${i}].name: invalid value "${c.name ?? ''}": must be a lowercase DNS label`
      if (names.has(c.name)) return `${field}[${i}].name: Duplicate value "${c.name}"`
      names.add(c.name)
      if (!c.image) return `${field}[${i}].image: Required value`
    }
  }
  if (!['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy ?? 'Always')) return `spec.restartPolicy: Unsupported value "${spec.restartPolicy}"`
  return staticPodReferences(pod)
}

/**
 * tryDecodeSinglePod + applyDefaults: one Pod (YAML or JSON) from a file,
 * named <name>-<node>, bound to the node, with a content hash for UID and
 * kubernetes.io/config.hash. Throws ManifestError with the problem.
 */
export function decodeStaticPod(text: string, path: string, nodeName: string): V1Pod {
  let pod: V1Pod
  try {
    pod = loadYaml<V1Pod>(text)
  } catch (error) {
    throw new ManifestError(`cannot parse: ${(error as Error).message.split('\n')[0]}`)
  }
  if (!pod || typeof pod !== 'object' || pod.kind !== 'Pod' || pod.apiVersion !== 'v1') {
    throw new ManifestError(`not a Pod: expected apiVersion v1, kind Pod (got ${(pod as {apiVersion?: string})?.apiVersion ?? '?'}/${(pod as {kind?: string})?.kind ?? '?'})`)
  }
  if (!pod.metadata?.name) throw new ManifestError('invalid pod: name is needed for the pod')
  if (!pod.spec || !Array.isArray(pod.spec.containers)) throw new ManifestError('spec.containers: Required value')
  applyApiDefaults(pod)
  const uid = pod.metadata.uid || staticPodUID(pod, nodeName, path)
  pod.metadata.uid = uid
  pod.metadata.name = staticPodName(pod.metadata.name, nodeName)
  pod.metadata.namespace ||= DefaultStaticNamespace
  pod.metadata.annotations = {...pod.metadata.annotations, [ConfigHashAnnotation]: uid}
  pod.spec.nodeName = nodeName
  // File pods tolerate every NoExecute taint (the node's own taints never evict them).
  pod.spec.tolerations = [...(pod.spec.tolerations ?? []), {operator: 'Exists', effect: 'NoExecute'}]
  pod.status = {phase: 'Pending'}
  const problem = validateStaticPod(pod)
  if (problem) throw new ManifestError(problem)
  return pod
}

async function readCapped(path: string): Promise<string> {
  const fh = await open(path, 'r')
  try {
    const buf = Buffer.alloc(MaxManifestBytes + 1)
    let n = 0
    while (n < buf.length) {
      const {bytesRead} = await fh.read(buf, n, buf.length - n, n)
      if (bytesRead === 0) break
      n += bytesRead
    }
    if (n > MaxManifestBytes) throw new ManifestError(`file is larger than the ${MaxManifestBytes / 1024 / 1024} MiB limit`)
    return buf.subarray(0, n).toString('utf8')
  } finally {
    await fh.close()
  }
}

/**
 * One listing of a manifest directory (extractFromDir): non-recursive,
 * dotfiles skipped, sorted; every file is one Pod. A file that fails is
 * reported and left out; a missing directory is an empty listing.
 */
export async function readManifestDir(dir: string, nodeName: string): Promise<ManifestListing> {
  let names: string[]
  try {
    names = (await readdir(dir)).filter((n) => !n.startsWith('.')).sort()
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return {pods: [], problems: [], missing: true}
    if (code === 'ENOTDIR') return {pods: [], problems: [{file: dir, message: 'not a directory'}], missing: false}
    throw error
  }
  const pods: V1Pod[] = []
  const problems: ManifestProblem[] = []
  const byFullName = new Map<string, string>()
  for (const name of names) {
    const path = join(dir, name)
    try {
      const st = await stat(path)
      // Not recursing into directories, as the kubelet.
      if (st.isDirectory()) continue
      if (!st.isFile()) throw new ManifestError('not a regular file')
      if (st.size > MaxManifestBytes) throw new ManifestError(`file is larger than the ${MaxManifestBytes / 1024 / 1024} MiB limit`)
      const pod = decodeStaticPod(await readCapped(path), path, nodeName)
      const full = podKeyOf(pod)
      const first = byFullName.get(full)
      // filterInvalidPods: within one source the first pod with a name wins.
      if (first) throw new ManifestError(`duplicate pod name "${full}" (already defined by ${first}), ignoring`)
      byFullName.set(full, path)
      pods.push(pod)
    } catch (error) {
      // Gone between the listing and the read: simply not there any more.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      problems.push({file: path, message: error instanceof ManifestError ? error.message : (error as Error).message})
    }
  }
  return {pods, problems, missing: false}
}

export interface FileSourceHandler {
  /** A complete listing (kubelet: a SET for source "file"); an empty or missing directory is an empty listing. */
  onSet(pods: V1Pod[]): void
  /** A file is skipped now (reported once per file and problem). */
  onProblem(problem: ManifestProblem): void
  onError?(message: string): void
}

export interface FileSourceOptions {
  dir: string
  nodeName: string
  checkIntervalMs?: number
  debounceMs?: number
}

/**
 * The file source: lists the directory at start, on every change
 * notification (fs.watch, debounced) and every checkIntervalMs, and hands
 * each complete listing on. A directory created later is picked up by the
 * periodic listing and then watched.
 */
export class FileSource {
  private watcher: FSWatcher | undefined
  /** The inode watched: a directory deleted and made again is a new one to watch. */
  private watchedIno: number | undefined
  private interval: NodeJS.Timeout | undefined
  private debounce: NodeJS.Timeout | undefined
  /** One listing at a time; a trigger during one lists once more after it. */
  private readonly lister = new SerialRunner(() => this.listOnce(), {active: () => !this.stopped})
  private stopped = false
  private readonly reported = new Map<string, string>()

  constructor(
    private readonly opts: FileSourceOptions,
    private readonly handler: FileSourceHandler,
  ) {}

  /** Open timers and watchers (leak checks). */
  get handles(): number {
    return (this.watcher ? 1 : 0) + (this.interval ? 1 : 0) + (this.debounce ? 1 : 0)
  }

  /** First listing done (handed on) when this resolves. */
  async start(): Promise<void> {
    this.interval = setInterval(() => this.relist(), this.opts.checkIntervalMs ?? DefaultFileCheckIntervalMs)
    this.interval.unref()
    await this.relist()
  }

  /** List again now (coalesced with a listing in progress). */
  relist(): Promise<void> {
    return this.lister.run()
  }

  private async listOnce(): Promise<void> {
    let listing: ManifestListing
    try {
      listing = await readManifestDir(this.opts.dir, this.opts.nodeName)
    } catch (error) {
      // Unreadable right now (permissions...): keep the last listing rather than dropping every pod.
      this.handler.onError?.(`static pod manifests ${this.opts.dir}: ${(error as Error).message}`)
      return
    }
    if (this.stopped) return
    await this.ensureWatch(listing.missing)
    if (this.stopped) return
    this.report(listing.problems)
    this.handler.onSet(listing.pods)
  }

  private report(problems: ManifestProblem[]): void {
    const now = new Map(problems.map((p) => [p.file, p.message]))
    for (const file of [...this.reported.keys()]) if (!now.has(file)) this.reported.delete(file)
    for (const p of problems) {
      if (this.reported.get(p.file) === p.message) continue
      this.reported.set(p.file, p.message)
      this.handler.onProblem(p)
    }
  }

  private async ensureWatch(missing: boolean): Promise<void> {
    const ino = missing
      ? undefined
      : await stat(this.opts.dir).then(
          (s) => s.ino,
          () => undefined,
        )
    if (ino === undefined || ino !== this.watchedIno) this.closeWatch()
    if (ino === undefined || this.watcher || this.stopped) return
    try {
      this.watchedIno = ino
      this.watcher = watch(this.opts.dir, {persistent: false}, () => this.changed())
      this.watcher.on('error', () => {
        // The directory went away: the periodic listing notices and watches it again when it is back.
        this.closeWatch()
        this.changed()
      })
    } catch {
      this.watcher = undefined
    }
  }

  private changed(): void {
    if (this.stopped) return
    clearTimeout(this.debounce)
    this.debounce = setTimeout(() => {
      this.debounce = undefined
      void this.relist()
    }, this.opts.debounceMs ?? DefaultFileDebounceMs)
    this.debounce.unref()
  }

  private closeWatch(): void {
    this.watcher?.close()
    this.watcher = undefined
    this.watchedIno = undefined
  }

  /** Close the watcher and timers; a listing in progress finishes without handing anything on. */
  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.interval)
    clearTimeout(this.debounce)
    this.interval = undefined
    this.debounce = undefined
    this.closeWatch()
    await this.lister.running?.catch(() => undefined)
    this.reported.clear()
  }
}
