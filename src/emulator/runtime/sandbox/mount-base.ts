import {spawn, type ChildProcess} from 'node:child_process'
import {mkdir} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import {createInterface} from 'node:readline'
import {isWithin} from '../../../common/paths.js'
import {hostProgram} from '../process/host-programs.js'
import {buildHiddenLayer, HiddenLayerDirName, hiddenLayerEntries, type HiddenLayer} from './hidden-layer.js'
import {parseMountinfo, readMountinfo, recentMountTable, type MountEntry, type MountTable} from './mountinfo.js'
import {ShellProgram, SetprivProgram, UnsafeInMountOptions, UnshareProgram, withTopLower} from './root-layer.js'
import type {ContainerSandboxSpec, SandboxWalls} from './spec.js'
import {hiddenFromContainers} from './container-view.js'

/**
 * The mount namespace every sandboxed start begins from (as root): a copy
 * of the host's without its network namespaces' files, a slave of the
 * host's, so a mount made or removed on the host later reaches it as it
 * reaches the host's own.
 *
 * Why: a sandbox's setup copies the mount namespace it starts in (the
 * writable layer's unshare, then bwrap's own), and bwrap reads the whole
 * mount table again for each of its binds (a few dozen). A node with a pod
 * network holds one nsfs mount per pod and per warm pool entry under
 * /run/netns, two lines of the table each, so on the host's namespace a
 * start costs more with every pod: at 100 pods and a full pool, about 36 ms
 * of CPU a start against 13 ms from this namespace. A container never needs
 * those files (joining another pod's network is not a container's to do).
 *
 * One process of vnode's holds the namespace (sleep); it dies with vnode
 * (parent-death signal) and at close(). The host's mounts (but the nsfs
 * ones) are compared with the base's at each start: where the host's root
 * mount is private, no change reaches the base by propagation, so one that
 * changed (a disk mounted, /run/netns made a mount by the first `ip netns
 * add`) makes a new base, which the start that found the change waits for,
 * and the old one goes. Until the first is ready, and where none can be
 * made, starts begin from the host's namespace, and nothing else changes.
 * A container that binds a directory the base lacks (a hostPath volume of
 * /run/netns, or of /) starts from the host's namespace too: it asked for
 * the host's files there, and gets them as a kubelet's container would.
 *
 * With writable layers as root, each base also holds the node's hidden paths
 * as a layer for the overlay of `/` (hidden-layer.ts), built once the holder
 * is ready and before its starts; a start from the host's namespace masks
 * them as bwrap always did.
 */

/** The umount(8) step and the holder: fixed scripts, the program paths and the directory are arguments, never parsed by the shell. */
export const MountBaseScript = '"$1" -R -l "$2" 2>/dev/null; "$1" -a -l -t nsfs 2>/dev/null; echo ready; exec "$3" infinity'
const UmountProgram = 'umount'
const SleepProgram = 'sleep'
/** How long the holder may take to unmount the namespace files and say it is ready. */
export const DefaultMountBaseStartMs = 10_000
/** How long a replaced base is kept for the starts that took its path just before (a start enters it within milliseconds). */
export const DefaultRetiredBaseMs = 10_000
/** After a base could not be remade, the next try waits this long (each failure is logged once). */
export const DefaultMountBaseRetryMs = 60_000

/** The directories whose namespace files the base lacks: the netns dir, and each directory that holds an nsfs mount (mountinfo's). */
export function nsfsDirs(mountinfo: string, netnsDir: string): string[] {
  return [
    ...new Set([
      netnsDir,
      ...parseMountinfo(mountinfo)
        .filter((m) => m.fsType === 'nsfs')
        .map((m) => dirname(m.point)),
    ]),
  ]
}

/**
 * The host's mounts a base is a copy of: each mount's point, type and source
 * (mountinfo's), the network namespaces' files left out. A base whose
 * signature is not the host's now is stale.
 */
export function mountsSignature(mountinfo: string | MountEntry[]): string {
  return (typeof mountinfo === 'string' ? parseMountinfo(mountinfo) : mountinfo)
    .filter((m) => m.fsType !== 'nsfs')
    .map((m) => `${m.point} ${m.fsType} ${m.source}`)
    .sort()
    .join('\n')
}

/** Whether a bind shows one of those directories, or a part of one: its source is in it, or holds it. */
export function bindsLackedDir(binds: readonly {source: string}[], lacked: readonly string[]): boolean {
  return binds.some((b) => lacked.some((d) => isWithin(d, b.source) || isWithin(b.source, d)))
}

/** One holder of a base: its process, what it lacks, the host's mounts it copied and its hidden paths' layer. */
interface Holder {
  child: ChildProcess
  pid: number
  lacked: string[]
  signature: string
  exited: boolean
  /** The host's mount table the holder copied. */
  table: MountEntry[]
  hiddenLayer?: HiddenLayer
}

/** The namespace a sandboxed start begins from, and the layer of hidden paths that namespace holds (hidden-layer.ts). */
export interface MountBaseChoice {
  /** The namespace's file. */
  path: string
  hiddenLayer?: HiddenLayer
}

/** With writable layers as root, each base of the node holds its hidden paths as a layer, on one empty directory of its state dir. */
export function hiddenLayerPlan(stateDir: string, walls: SandboxWalls | undefined): HiddenLayerPlan | undefined {
  if (walls?.layer !== 'root') return undefined
  return {dir: join(stateDir, HiddenLayerDirName), paths: () => hiddenFromContainers(stateDir, walls)}
}

/**
 * A sandboxed start from a base (none: the host's namespace): the base's
 * namespace, and its layer of hidden paths as the top lower layer of the
 * start's overlay of `/` when that overlay is its only one (several are
 * mounted from an fstab written before the base is chosen).
 */
export function startFrom(view: ContainerSandboxSpec, base: MountBaseChoice | undefined): ContainerSandboxSpec {
  if (!base) return view
  const layer = view.rootLayer
  const hidden = base.hiddenLayer
  if (!hidden || layer?.mode !== 'root' || !layer.root || layer.mounts.length !== 1) return {...view, mountBase: base.path}
  return {...view, mountBase: base.path, rootLayer: withTopLower(layer, hidden.lower), layerHides: hidden.covers}
}

/** Where each base builds its layer of hidden paths (as root, with a writable layer per container), and which paths. */
export interface HiddenLayerPlan {
  /** An empty directory of the node's, the layer's mount point in the base. */
  dir: string
  /** The paths hidden from containers now (read at each base's making). */
  paths: () => string[]
}

export class SandboxMountBase {
  private current: Holder | undefined
  private making: Promise<void> | undefined
  private closed = false
  /** After a base could not be remade, starts begin from the host's namespace until then (epoch ms). */
  private retryAt = 0
  /** Bases replaced by a newer one, until they go (DefaultRetiredBaseMs). */
  private readonly retired = new Set<Holder>()
  /** The host's mount table as last read at a start, and its signature. */
  private lastRead = {text: '', signature: ''}

  /** The last reason a layer of hidden paths could not be built (logged once per reason). */
  private layerFailure = ''

  private constructor(
    private readonly netnsDir: string,
    private readonly log: (line: string) => void,
    private readonly hidden: HiddenLayerPlan | undefined,
  ) {}

  /** Makes the first base; undefined where none can be made (its programs missing, no privilege), with the reason given to log. */
  static async start(netnsDir: string, log: (line: string) => void = () => undefined, hidden?: HiddenLayerPlan): Promise<SandboxMountBase | undefined> {
    const base = new SandboxMountBase(netnsDir, log, hidden)
    await base.make()
    return base.current ? base : undefined
  }

  /**
   * The namespace a container with these binds starts from: the base,
   * unless a bind shows what the base lacks, or no base can be made: then
   * the host's (undefined).
   *
   * A start that finds the base stale (the host's mounts changed since it
   * was made) or gone waits for the one made now, from the host's mounts of
   * now: from the host's namespace, bwrap would bind /run with every network
   * namespace file below it, and a pool entry or a pod's namespace removed
   * meanwhile fails its setup ("Can't bind mount ... remount ...: No such
   * file or directory").
   */
  async pathFor(binds: readonly {source: string}[]): Promise<MountBaseChoice | undefined> {
    const h = await this.fresh()
    if (!h || bindsLackedDir(binds, h.lacked)) return undefined
    return {path: `/proc/${h.pid}/ns/mnt`, ...(h.hiddenLayer ? {hiddenLayer: h.hiddenLayer} : {})}
  }

  /**
   * The base with the host's mounts as of this start: the current one, or
   * one made after it began. A remake already under way read the host's
   * mounts before: when it is stale too, one more is made and taken (a
   * mount made while that one is made may be in it or not, as for any start
   * beside a mount). Undefined when none could be made.
   */
  private async fresh(): Promise<Holder | undefined> {
    let h = this.current
    for (let round = 0; round < 2; round++) {
      if (h && !h.exited && !this.stale(h, recentMountTable())) return h
      const before = h
      this.remake()
      await this.making
      h = this.current
      if (!h || h === before || h.exited) return undefined
    }
    return h
  }

  /** Whether the host's mounts are no longer those the holder copied; a table the same as the last one read is not parsed again. */
  private stale(h: Holder, table: MountTable): boolean {
    if (table.text !== this.lastRead.text) this.lastRead = {text: table.text, signature: mountsSignature(table.entries)}
    return this.lastRead.signature !== h.signature
  }

  /** The holder's pid (tests: what it sees, and that it is gone after close). */
  get pid(): number | undefined {
    return this.current?.pid
  }

  close(): void {
    this.closed = true
    for (const h of [this.current, ...this.retired]) if (h && !h.exited) h.child.kill('SIGKILL')
    this.current = undefined
    this.retired.clear()
  }

  /** A new base in the background, one at a time; the old one goes once the new one is ready. */
  private remake(): void {
    if (this.making || this.closed || Date.now() < this.retryAt) return
    this.making = this.make().finally(() => (this.making = undefined))
  }

  private async make(): Promise<void> {
    const h = await startHolder(this.netnsDir, this.log)
    if (!h) {
      this.retryAt = Date.now() + DefaultMountBaseRetryMs
      return
    }
    if (this.hidden && !this.closed) await this.addHiddenLayer(h, this.hidden)
    if (this.closed) {
      h.child.kill('SIGKILL')
      return
    }
    const old = this.current
    this.current = h
    // A start that took the old base's path moments ago may not have entered it yet: it goes a little later.
    if (old && !old.exited) {
      this.retired.add(old)
      setTimeout(() => {
        this.retired.delete(old)
        if (!old.exited) old.child.kill('SIGKILL')
      }, DefaultRetiredBaseMs).unref()
    }
  }

  /** The base's layer of hidden paths; without one (logged once per reason), its starts mask them as before. */
  private async addHiddenLayer(h: Holder, plan: HiddenLayerPlan): Promise<void> {
    if (UnsafeInMountOptions.test(plan.dir)) return
    const built = await mkdir(plan.dir, {recursive: true, mode: 0o700})
      .then(() => buildHiddenLayer(h.pid, plan.dir, hiddenLayerEntries(plan.paths(), h.table)))
      .catch((error: unknown) => ({ok: false as const, reason: (error as Error).message}))
    if (built.ok) {
      h.hiddenLayer = built.layer
      return
    }
    if (built.reason !== this.layerFailure) this.log(`hidden paths are masked at each sandboxed start: their layer could not be built (${built.reason})`)
    this.layerFailure = built.reason
  }
}

/** Starts a holder: the host's mounts and what it lacks are read first, so a change made meanwhile makes the next start remake it. */
async function startHolder(netnsDir: string, log: (line: string) => void): Promise<Holder | undefined> {
  const info = readMountinfo()
  const lacked = nsfsDirs(info, netnsDir)
  const table = parseMountinfo(info)
  const signature = mountsSignature(table)
  const child = spawn(
    hostProgram(SetprivProgram),
    [
      '--pdeathsig',
      'KILL',
      '--',
      hostProgram(UnshareProgram),
      '--mount',
      '--propagation',
      'slave',
      '--',
      hostProgram(ShellProgram),
      '-c',
      MountBaseScript,
      'vnode-mount-base',
      hostProgram(UmountProgram),
      netnsDir,
      hostProgram(SleepProgram),
    ],
    {stdio: ['ignore', 'pipe', 'pipe'], cwd: '/'},
  )
  child.on('error', () => undefined)
  let stderr = ''
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)))
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), DefaultMountBaseStartMs)
    const lines = createInterface({input: child.stdout!})
    lines.once('line', (l) => {
      clearTimeout(timer)
      resolve(l.trim() === 'ready')
    })
    child.once('exit', () => {
      clearTimeout(timer)
      resolve(false)
    })
  })
  if (!ready || child.pid === undefined || child.exitCode !== null) {
    if (child.exitCode === null) child.kill('SIGKILL')
    log(`sandboxes start from the host's mount namespace: its copy without network namespace files could not be made${stderr.trim() ? ` (${stderr.trim()})` : ''}`)
    return undefined
  }
  // sleep writes nothing: its pipes are not read again, and the holder never keeps vnode's event loop alive.
  child.stdout!.destroy()
  child.stderr!.destroy()
  child.unref()
  const h: Holder = {child, pid: child.pid, lacked, signature, exited: false, table}
  child.once('exit', () => (h.exited = true))
  return h
}
