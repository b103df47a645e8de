import {hostProgram, PerlProgram, perlScriptArgv, type PerlScript, speaksToPerl} from '../process/host-programs.js'
import {layerPrefix} from './root-layer.js'
import type {ContainerSandboxSpec} from './spec.js'

export const NsenterProgram = 'nsenter'

/**
 * How a sandboxed start gets from vnode to bwrap: it joins the pod's
 * network namespace and the node's mount base (both files opened first, in
 * vnode's own view: the network namespace's file is not in the base), makes
 * a mount namespace of the instance's own (private propagation), mounts the
 * writable layer in it, and execs bwrap.
 *
 * Four programs did that (nsenter, unshare, sh, mount(8)), and each
 * program start here costs about a millisecond of CPU before its main
 * (glibc's start-up: cpuid traps to the hypervisor on a VM), mount(8)
 * more (it parses the mount table). As root with the one overlay of `/`
 * (the usual case), one program does it by system calls: a fixed perl
 * script (Debian's perl-base, the runtime's placing step already:
 * placed-argv.ts), its paths and options arguments, never parsed. The
 * helper, itself perl, runs it in the process it forks for the monitor
 * (SandboxEntry.script), so no program starts before bwrap there.
 * Elsewhere the four programs still do: another architecture (the calls'
 * numbers are per architecture), several overlays (`mount -a`), the
 * unprivileged mode (a user namespace first), no perl, or a container
 * environment that speaks to perl (PERL5OPT and the like would run as root
 * before the sandbox).
 */

/** Numbers of the calls the entry script makes, per architecture (asm/unistd.h); elsewhere the programs do it. */
export const EntrySyscalls: Partial<Record<NodeJS.Architecture, {setns: number; unshare: number; mount: number}>> = {
  x64: {setns: 308, unshare: 272, mount: 165},
  arm64: {setns: 268, unshare: 97, mount: 40},
}

/**
 * The variable that keeps perl quiet when the container's locale is not
 * installed on the host (its start would warn on the container's stderr);
 * the script takes it out of the environment before anything else runs.
 */
export const PerlQuietLocale = 'PERL_BADLANG'

/**
 * The entry script. Its arguments: the three call numbers, the network
 * namespace file and the mount base ('' for none), the overlay's options
 * and target, `--`, then the command. Exit status 1 when a namespace cannot
 * be joined or made (nsenter's and unshare's), 125 when the overlay is not
 * mounted (the shell step's), 127 when the command cannot be run. Strings
 * go to syscall() as variables: perl refuses a literal (the call may write).
 * CLONE_NEWNET 0x40000000, CLONE_NEWNS 0x20000, MS_REC|MS_PRIVATE 0x44000.
 */
export const EntryScript = [
  `delete $ENV{${PerlQuietLocale}};`,
  'my ($setns, $unshare, $mount, $net, $base, $options, $target) = splice(@ARGV, 0, 7); shift @ARGV;',
  'sub fail { print STDERR "vnode-entry: $_[0]: $!\\n"; exit $_[1] }',
  'my @join; for ([$net, 0x40000000], [$base, 0x20000]) { next if $_->[0] eq ""; open(my $h, "<", $_->[0]) or fail("cannot open $_->[0]", 1); push @join, [$h, @$_] }',
  'for (@join) { syscall($setns + 0, fileno($_->[0]), $_->[2]) == 0 or fail("cannot join $_->[1]", 1) }',
  'syscall($unshare + 0, 0x20000) == 0 or fail("cannot make a mount namespace", 1);',
  'my ($none, $root, $overlay) = ("none", "/", "overlay");',
  'syscall($mount + 0, $none, $root, 0, 0x44000, 0) == 0 or fail("cannot make / private", 1);',
  'syscall($mount + 0, $overlay, $target, $overlay, 0, $options) == 0 or fail("mount overlay on $target", 125);',
  'exec { $ARGV[0] } @ARGV; fail("exec $ARGV[0]", 127)',
].join(' ')

/** The argv that runs bwrap's argv (`then`) in the sandbox's namespaces and layer, and the environment to spawn it with. */
export interface SandboxEntry {
  argv: string[]
  env: Record<string, string>
  /** The entry script, when argv runs it (`perl -e`): a perl already running (the helper) runs it itself. */
  script?: PerlScript
}

/** The entry of one sandboxed start: one program where it can be (see above), the four otherwise. */
export function sandboxEntry(sandbox: ContainerSandboxSpec, env: Record<string, string>, then: string[], arch: NodeJS.Architecture = process.arch): SandboxEntry {
  const layer = sandbox.rootLayer
  const calls = EntrySyscalls[arch]
  const perl = hostProgram(PerlProgram)
  const [mount] = layer?.mounts ?? []
  if (layer?.mode === 'root' && layer.mounts.length === 1 && mount && calls && perl.startsWith('/') && !speaksToPerl(env)) {
    const numbers = [calls.setns, calls.unshare, calls.mount].map(String)
    const script = {source: EntryScript, args: [...numbers, sandbox.netns ?? '', sandbox.mountBase ?? '', mount.options, mount.target, '--', ...then]}
    return {argv: perlScriptArgv(script), env: {...env, [PerlQuietLocale]: '0'}, script}
  }
  const inLayer = [...(layer ? layerPrefix(layer) : []), ...then]
  const enter = [...(sandbox.netns ? [`--net=${sandbox.netns}`] : []), ...(sandbox.mountBase ? [`--mount=${sandbox.mountBase}`] : [])]
  return {argv: enter.length > 0 ? [hostProgram(NsenterProgram), ...enter, '--', ...inLayer] : inLayer, env}
}
