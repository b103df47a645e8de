import {spawn, type ChildProcess} from 'node:child_process'
import {readFileSync} from 'node:fs'
import {dirname} from 'node:path'
import {createInterface} from 'node:readline'
import {isWithin} from '../../../common/paths.js'
import {hostProgram} from '../process/host-programs.js'
import {ShellProgram, SetprivProgram, UnshareProgram} from './root-layer.js'

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
 * (parent-death signal) and at close(). While it does not run, starts
 * begin from the host's namespace, as before, and nothing else changes.
 * A container that binds a directory the base lacks (a hostPath volume of
 * /run/netns, or of /) starts from the host's namespace too: it asked for
 * the host's files there, and gets them as a kubelet's container would.
 */

/** The umount(8) step and the holder: fixed scripts, the program paths and the directory are arguments, never parsed by the shell. */
export const MountBaseScript = '"$1" -R -l "$2" 2>/dev/null; "$1" -a -l -t nsfs 2>/dev/null; echo ready; exec "$3" infinity'
const UmountProgram = 'umount'
const SleepProgram = 'sleep'
/** How long the holder may take to unmount the namespace files and say it is ready. */
export const DefaultMountBaseStartMs = 10_000

/** The directories whose namespace files the base lacks: the netns dir, and each directory that holds an nsfs mount (mountinfo's). */
export function nsfsDirs(mountinfo: string, netnsDir: string): string[] {
  const dirs = new Set([netnsDir])
  for (const line of mountinfo.split('\n')) {
    if (!/ - nsfs /.test(line)) continue
    const point = (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (point.startsWith('/')) dirs.add(dirname(point))
  }
  return [...dirs]
}

/** Whether a bind shows one of those directories, or a part of one: its source is in it, or holds it. */
export function bindsLackedDir(binds: readonly {source: string}[], lacked: readonly string[]): boolean {
  return binds.some((b) => lacked.some((d) => isWithin(d, b.source) || isWithin(b.source, d)))
}

export class SandboxMountBase {
  private exited = false

  private constructor(
    private readonly holder: ChildProcess,
    /** What the base lacks (nsfsDirs), read when it was made. */
    private readonly lacked: string[],
  ) {
    holder.once('exit', () => (this.exited = true))
  }

  /** Starts the holder; undefined where it cannot run (its programs missing, no privilege), with the reason given to log. */
  static async start(netnsDir: string, log: (line: string) => void = () => undefined): Promise<SandboxMountBase | undefined> {
    let lacked = [netnsDir]
    try {
      lacked = nsfsDirs(readFileSync('/proc/self/mountinfo', 'utf8'), netnsDir)
    } catch {
      // No mount table to read: the netns dir alone.
    }
    const holder = spawn(
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
    holder.on('error', () => undefined)
    let stderr = ''
    holder.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)))
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), DefaultMountBaseStartMs)
      const lines = createInterface({input: holder.stdout!})
      lines.once('line', (l) => {
        clearTimeout(timer)
        resolve(l.trim() === 'ready')
      })
      holder.once('exit', () => {
        clearTimeout(timer)
        resolve(false)
      })
    })
    if (!ready || holder.pid === undefined || holder.exitCode !== null) {
      if (holder.exitCode === null) holder.kill('SIGKILL')
      log(`sandboxes start from the host's mount namespace: its copy without network namespace files could not be made${stderr.trim() ? ` (${stderr.trim()})` : ''}`)
      return undefined
    }
    // sleep writes nothing: its pipes are not read again, and the holder never keeps vnode's event loop alive.
    holder.stdout!.destroy()
    holder.stderr!.destroy()
    holder.unref()
    return new SandboxMountBase(holder, lacked)
  }

  /** The namespace's path for nsenter --mount, while its holder runs. */
  get path(): string | undefined {
    return this.exited ? undefined : `/proc/${this.holder.pid}/ns/mnt`
  }

  /** The namespace a container with these binds starts from: the base, unless a bind shows what the base lacks (then the host's, undefined). */
  pathFor(binds: readonly {source: string}[]): string | undefined {
    return bindsLackedDir(binds, this.lacked) ? undefined : this.path
  }

  /** The holder's pid (tests: what it sees, and that it is gone after close). */
  get pid(): number | undefined {
    return this.holder.pid
  }

  close(): void {
    if (!this.exited) this.holder.kill('SIGKILL')
  }
}
