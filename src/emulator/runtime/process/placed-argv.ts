import {ExecStartError, resolveExecutable} from './executable.js'
import {hostProgram, PerlProgram, speaksToPerl} from './host-programs.js'
import type {SpawnSpec} from './process-spec.js'

/**
 * The step that puts a bare container process in its cgroups before its
 * program runs: it writes its own pid to each cgroup.procs file given, up
 * to `--`, then execs the program (the path after `--`) with the argv that
 * follows (argv[0] as the spec gave it). A fixed script: the files and the
 * command are its arguments, never parsed. Perl (Debian's perl-base, an
 * Essential package) rather than a shell: a shell rewrites the environment
 * it execs with (dash sets PWD and IFS and drops names it cannot hold, such
 * as `a.b`, which Kubernetes allows); perl passes it on as it got it.
 */
export const PlaceScript =
  'while (@ARGV && $ARGV[0] ne "--") { my $f = shift @ARGV; open(my $h, ">", $f) or exit 126; print $h "$$\\n"; close($h) or exit 126 } ' +
  'shift @ARGV; my $path = shift @ARGV; exec { $path } @ARGV; print STDERR "exec $path: $!\\n"; exit 127'

/**
 * The argv of a bare host process: with cgroupProcs, through the placing
 * step (placed), so that nothing of the program runs outside its cgroups.
 * As given (not placed: the start places it right after its spawn) when there is no perl
 * on vnode's PATH or the container's environment speaks to perl; and when
 * the program does not resolve, so that the spawn fails with its own error
 * (the StartError message of every other start).
 */
export function placedArgv(spec: SpawnSpec, file: string, args: string[]): {argv: string[]; placed: boolean} {
  const given = {argv: [file, ...args], placed: false}
  const perl = hostProgram(PerlProgram)
  if (!spec.cgroupProcs?.length || !perl.startsWith('/') || speaksToPerl(spec.env)) return given
  let path: string
  try {
    path = resolveExecutable(file, spec.env, spec.cwd)
  } catch (error) {
    if (error instanceof ExecStartError) return given
    throw error
  }
  return {argv: [perl, '-e', PlaceScript, ...spec.cgroupProcs, '--', path, file, ...args], placed: true}
}
