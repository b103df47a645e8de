import {spawn} from 'node:child_process'
import {lstatSync, realpathSync} from 'node:fs'
import {dirname} from 'node:path'
import {isWithin} from '../../../common/paths.js'
import {hostProgram, PerlProgram, perlScriptArgv, type PerlScript} from '../process/host-programs.js'
import {EntrySyscalls} from './entry.js'
import type {MountEntry} from './mountinfo.js'
import {OwnTopLevel} from './root-layer.js'

/**
 * The hidden paths as a lower layer of the overlay of `/` (as root), made
 * once per mount base instead of mounted at every start.
 *
 * A hidden path used to be masked by bwrap at each start: an empty tmpfs on
 * a directory, an empty file bound on a file. A dozen masks is a dozen
 * mounts more per container, each bind followed by bwrap reading the whole
 * mount table again, and every mount of every start of a burst serialised
 * on the kernel's namespace lock; the masks also showed in the container's
 * mountinfo, each naming a host path. Here the mount base (mount-base.ts)
 * gets a small tmpfs of its own, read-only once built, holding for each
 * hidden path on the root filesystem an opaque empty directory (the
 * overlay shows none of the host's entries below it) or an empty file, in
 * directories with the host's modes, owners and times; a start from that
 * base mounts its overlay with `lowerdir=<layer>:/`, and its view has the
 * same empty directories and files without one mount for them. What the
 * container writes there goes to its own upper layer, as anywhere else.
 *
 * Only what the layer can show the same way is in it: a directory or
 * non-link file whose ancestors are directories (no link), on the root
 * filesystem (another mount below `/` is not in that overlay's lower layer),
 * and not inside another path of the layer. The rest (a path under a mount
 * of its own, a link, a path that does not exist yet, a state dir
 * registered after the base was made) is still masked at each start. A
 * path in the layer stays hidden whatever the host does with it later: a
 * directory removed or replaced by a link still shows empty.
 *
 * The tmpfs is mounted in the base's namespace only (by setns, never in the
 * host's), so it goes with the base's holder and with the last container
 * whose overlay uses it: nothing is left on the host.
 */

/** Where the layer's tmpfs is mounted (in the base's namespace), under the node's state dir. */
export const HiddenLayerDirName = 'hidden-layer'

/** How long the layer's build may take before the base goes without it. */
export const DefaultHiddenLayerBuildMs = 10_000

/** Numbers of the calls the build makes, per architecture (asm/unistd.h): no layer elsewhere. */
export const HiddenLayerSyscalls: Partial<Record<NodeJS.Architecture, {setns: number; mount: number; setxattr: number}>> = {
  x64: {setns: EntrySyscalls.x64!.setns, mount: EntrySyscalls.x64!.mount, setxattr: 188},
  arm64: {setns: EntrySyscalls.arm64!.setns, mount: EntrySyscalls.arm64!.mount, setxattr: 5},
}

/** A hidden path the layer holds: an opaque empty directory, or an empty file. */
export interface HiddenLayerEntry {
  kind: 'dir' | 'file'
  path: string
}

/** A built layer: the lower directory to mount with, and the hidden paths it covers. */
export interface HiddenLayer {
  lower: string
  covers: string[]
}

/** What a path is on the host, links not followed; undefined when it does not exist. */
export type LookHost = (path: string) => {kind: 'dir' | 'file' | 'symlink'; real?: string} | undefined

function lookHost(path: string): ReturnType<LookHost> {
  try {
    const st = lstatSync(path, {throwIfNoEntry: false})
    if (!st) return undefined
    return {kind: st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'file', real: st.isDirectory() ? realpathSync(path) : undefined}
  } catch {
    return undefined
  }
}

/**
 * Which of the hidden paths the layer can hold (see above), shallowest
 * first; `table` is the host's mount table.
 */
export function hiddenLayerEntries(paths: readonly string[], table: readonly MountEntry[], look: LookHost = lookHost): HiddenLayerEntry[] {
  const otherMounts = table.map((m) => m.point).filter((p) => p !== '/')
  const candidates = [...new Set(paths)].filter((p) => p.startsWith('/') && p !== '/' && !OwnTopLevel.has(p.split('/')[1]!)).sort((a, b) => a.length - b.length)
  const out: HiddenLayerEntry[] = []
  for (const p of candidates) {
    if (otherMounts.some((m) => isWithin(m, p))) continue
    if (out.some((e) => e.kind === 'dir' && isWithin(e.path, p))) continue
    const found = look(p)
    if (!found || found.kind === 'symlink') continue
    const parent = dirname(p)
    if (parent !== '/' && look(parent)?.real !== parent) continue
    out.push({kind: found.kind, path: p})
  }
  return out
}

/**
 * The build, in a perl of its own (Debian's perl-base, as the sandbox's
 * entry): it joins the base's mount namespace, mounts the tmpfs (nosuid,
 * nodev, noexec), makes each entry with its directories, copies the host's
 * attributes, and remounts the tmpfs read-only. Its arguments: the three
 * call numbers, the namespace file, the layer's directory, then pairs of
 * kind and path. Exit status 1 with the reason on stderr when any step
 * fails. Strings go to syscall() as variables: perl refuses a literal (the
 * call may write). CLONE_NEWNS 0x20000; MS_NOSUID|MS_NODEV|MS_NOEXEC 14,
 * with MS_REMOUNT|MS_RDONLY 0x20 | 1.
 */
export const HiddenLayerScript = [
  'my ($setns, $mount, $setxattr, $ns, $dir) = splice(@ARGV, 0, 5);',
  'sub fail { print STDERR "$_[0]: $!\\n"; exit 1 }',
  'open(my $h, "<", $ns) or fail("cannot open $ns"); syscall($setns + 0, fileno($h), 0x20000) == 0 or fail("cannot join the mount base");',
  'my ($fs, $opts, $none, $empty) = ("tmpfs", "mode=0755,size=1m", "none", "");',
  'syscall($mount + 0, $fs, $dir, $fs, 14, $opts) == 0 or fail("cannot mount a tmpfs on $dir");',
  'my %times;',
  'sub attrs { my ($host, $made) = @_; my @s = lstat($host) or fail("cannot stat $host"); chown($s[4], $s[5], $made) or fail("cannot chown $made"); chmod($s[2] & 07777, $made) or fail("cannot chmod $made"); $times{$made} = [$s[8], $s[9]] }',
  'while (@ARGV) { my ($kind, $path) = splice(@ARGV, 0, 2); my ($host, $made) = ("", $dir); my @parts = grep { length } split m{/}, $path; my $last = pop @parts;',
  '  for (@parts) { $host .= "/$_"; $made .= "/$_"; next if -d $made; mkdir($made) or fail("cannot make $made"); attrs($host, $made) }',
  '  $made .= "/$last";',
  '  if ($kind eq "dir") { mkdir($made) or fail("cannot make $made"); my ($name, $value) = ("trusted.overlay.opaque", "y"); syscall($setxattr + 0, $made, $name, $value, 1, 0) == 0 or fail("cannot make $made opaque") }',
  '  else { open(my $f, ">", $made) or fail("cannot make $made"); close($f) }',
  '  attrs($path, $made) }',
  'utime($times{$_}[0], $times{$_}[1], $_) or fail("cannot set the times of $_") for keys %times;',
  'syscall($mount + 0, $none, $dir, $empty, 14 | 0x20 | 1, $empty) == 0 or fail("cannot make $dir read-only");',
].join(' ')

/** The build's script and arguments, or undefined on an architecture whose call numbers are not known. */
export function hiddenLayerScript(namespaceFile: string, dir: string, entries: readonly HiddenLayerEntry[], arch: NodeJS.Architecture = process.arch): PerlScript | undefined {
  const calls = HiddenLayerSyscalls[arch]
  if (!calls) return undefined
  return {source: HiddenLayerScript, args: [String(calls.setns), String(calls.mount), String(calls.setxattr), namespaceFile, dir, ...entries.flatMap((e) => [e.kind, e.path])]}
}

/**
 * Builds the layer in the mount namespace of `holderPid` at `dir` (an
 * existing empty directory); the reason when it cannot be.
 */
export async function buildHiddenLayer(
  holderPid: number,
  dir: string,
  entries: readonly HiddenLayerEntry[],
  timeoutMs = DefaultHiddenLayerBuildMs,
): Promise<{ok: true; layer: HiddenLayer} | {ok: false; reason: string}> {
  if (entries.length === 0) return {ok: false, reason: 'no hidden path can be held by a layer'}
  const script = hiddenLayerScript(`/proc/${holderPid}/ns/mnt`, dir, entries)
  if (!script) return {ok: false, reason: `no system call numbers for ${process.arch}`}
  const perl = hostProgram(PerlProgram)
  if (!perl.startsWith('/')) return {ok: false, reason: 'perl is not installed'}
  const [program, ...args] = perlScriptArgv(script)
  return new Promise((resolve) => {
    const child = spawn(program!, args, {stdio: ['ignore', 'ignore', 'pipe'], cwd: '/', timeout: timeoutMs, killSignal: 'SIGKILL'})
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)))
    child.on('error', (error) => resolve({ok: false, reason: error.message}))
    child.on('close', (code, signal) => {
      if (code === 0) resolve({ok: true, layer: {lower: dir, covers: entries.map((e) => e.path)}})
      else resolve({ok: false, reason: stderr.trim() || `perl ended with ${signal ?? `exit code ${code}`}`})
    })
  })
}
